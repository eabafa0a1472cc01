#include "data/seeded_order.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace memtrain::data {

std::uint64_t SeededRandom::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t SeededRandom::below(std::uint64_t bound) {
  // Rejection keeps the draw unbiased.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % bound);
  std::uint64_t r;
  do r = next();
  while (r >= limit);
  return r % bound;
}

std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  SeededRandom rng(seed * 0x100000001B3ull + static_cast<std::uint64_t>(epoch) + 1);
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[rng.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  return order;
}

EpochCursor::EpochCursor(std::int64_t n, std::uint64_t seed) : n_(n), seed_(seed), order_(epoch_order(n, seed, 0)) {}

std::vector<std::int64_t> EpochCursor::take(std::int64_t count) {
  if (cursor_ >= n_) {
    ++epoch_;
    cursor_ = 0;
    order_ = epoch_order(n_, seed_, epoch_);
  }
  const std::int64_t end = std::min(cursor_ + count, n_);
  std::vector<std::int64_t> picked(order_.begin() + cursor_, order_.begin() + end);
  cursor_ = end;
  return picked;
}

}  // namespace memtrain::data
