// What runs a schedule's AllReduce operations (core/gradient_reduction.h):
// one rank's sums of its gradient buckets over the ranks, beside compute.
// The executor calls it in schedule order. A sum allocates what it needs
// (flat copies) when it starts and frees it when compute next waits for
// it, so its memory is charged in schedule order; the sums themselves run
// beside compute (runtime/training/rank_gradient_sums.h).
#pragma once

#include <vector>

#include "core/reduce_stats.h"
#include "core/units.h"

namespace memtrain::runtime {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // The buckets' first stages, highest first: what the schedule must sum.
  virtual const std::vector<int>& first_stages() const = 0;
  // AllReduce of bucket `bucket`: its gradients are final on this rank;
  // start their sum. Returns how long compute waited (for a sum in flight).
  virtual Seconds start(int bucket) = 0;
  // Compute waits until bucket `bucket`'s sum has ended; returns the wait.
  virtual Seconds wait_for(int bucket) = 0;
  // Waits for every sum started; what the sums of this run cost.
  virtual ReduceStats finish() = 0;
};

}  // namespace memtrain::runtime
