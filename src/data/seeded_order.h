// Deterministic shuffles: the same seed gives the same order on every
// machine and standard library (std::shuffle's algorithm is unspecified).
#pragma once

#include <cstdint>
#include <vector>

namespace memtrain::data {

class SeededRandom {
 public:
  explicit SeededRandom(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();                      // splitmix64
  std::uint64_t below(std::uint64_t bound);  // uniform in [0, bound), bound > 0
 private:
  std::uint64_t state_;
};

// A permutation of 0..n-1 for `epoch` of a run seeded with `seed`.
std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

// Walks epoch_order() a batch at a time: every index once per epoch, the
// last batch of an epoch holding what is left, then the next epoch's order.
class EpochCursor {
 public:
  EpochCursor(std::int64_t n, std::uint64_t seed);
  std::vector<std::int64_t> take(std::int64_t count);
  std::int64_t epoch() const { return epoch_; }  // of the indices last taken

 private:
  std::int64_t n_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0, cursor_ = 0;
  std::vector<std::int64_t> order_;
};

}  // namespace memtrain::data
