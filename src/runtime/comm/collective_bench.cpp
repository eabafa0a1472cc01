#include "runtime/comm/collective_bench.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

namespace memtrain::runtime {

namespace {

using BenchClock = std::chrono::steady_clock;

Seconds seconds_from(BenchClock::time_point t0) {
  return std::chrono::duration<double>(BenchClock::now() - t0).count();
}

void meet(RankGroup& group) { group.gather({0.0}); }

// Each repeat's least time over the ranks.
std::vector<Seconds> least_over_ranks(RankGroup& group, const std::vector<Seconds>& mine) {
  const std::vector<std::vector<double>> all = group.gather(mine);
  std::vector<Seconds> out(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    out[i] = all[0][i];
    for (const std::vector<double>& theirs : all) out[i] = std::min(out[i], theirs[i]);
  }
  return out;
}

// One unit of work: a product of two square matrices the size of a layer's.
void one_product(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& out) { torch::mm_out(out, a, b); }

}  // namespace

std::vector<Seconds> time_all_reduce(RankGroup& group, Bytes bytes, std::int64_t tensors, int repeats) {
  const std::int64_t elements = std::max<std::int64_t>(tensors, bytes / 4);
  std::vector<torch::Tensor> pieces;
  for (std::int64_t i = 0; i < tensors; ++i) {
    const std::int64_t n = elements / tensors + (i < elements % tensors ? 1 : 0);
    pieces.push_back(torch::ones({n}, torch::kFloat));
  }
  group.sum(pieces);  // untimed: the connections' first use
  std::vector<Seconds> mine;
  for (int r = 0; r < repeats; ++r) {
    meet(group);
    const BenchClock::time_point t0 = BenchClock::now();
    group.sum(pieces);
    mine.push_back(seconds_from(t0));
  }
  return least_over_ranks(group, mine);
}

std::vector<Seconds> time_small_gather(RankGroup& group, int repeats) {
  std::vector<Seconds> mine;
  group.gather({1, 2, 3});
  for (int r = 0; r < repeats; ++r) {
    meet(group);
    const BenchClock::time_point t0 = BenchClock::now();
    group.gather({1, 2, 3});
    mine.push_back(seconds_from(t0));
  }
  return least_over_ranks(group, mine);
}

ComputeSlowdown measure_compute_slowdown(RankGroup& group, Seconds seconds) {
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::rand({384, 384}), b = torch::rand({384, 384});
  torch::Tensor out = torch::empty({384, 384});
  one_product(a, b, out);
  // Alone: each rank in turn counts the products it does in `seconds`.
  std::int64_t products = 0;
  Seconds alone = 0;
  for (int turn = 0; turn < group.world(); ++turn) {
    meet(group);
    if (turn != group.rank()) continue;
    const BenchClock::time_point t0 = BenchClock::now();
    while ((alone = seconds_from(t0)) < seconds) {
      one_product(a, b, out);
      ++products;
    }
  }
  // Together: the same count of products, every rank at once.
  meet(group);
  const BenchClock::time_point t0 = BenchClock::now();
  for (std::int64_t i = 0; i < products; ++i) one_product(a, b, out);
  const Seconds together = seconds_from(t0);
  const std::vector<std::vector<double>> all =
      group.gather({alone / static_cast<double>(products), together / static_cast<double>(products)});
  ComputeSlowdown s;
  for (const std::vector<double>& theirs : all) {
    s.alone += theirs[0] / static_cast<double>(all.size());
    s.together += theirs[1] / static_cast<double>(all.size());
  }
  return s;
}

}  // namespace memtrain::runtime
