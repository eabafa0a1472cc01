// `swap`: keep, recompute or offload, per stored activation. For budgets from
// the given one up to the keep-everything peak, it takes `optimal`'s recompute
// schedule at that larger budget and offloads every checkpoint, and what every
// forward with grad keeps beyond its output, whose copies hide under compute
// (with_hidden_offloads), which frees the memory the larger
// budget assumed, then drops the offloads the real budget does not need.
// Other candidates offload early and recompute late: `optimal` at the budget
// on the chain with the first j stages' saved tensors counted as free, the
// offloads then added the same way. The Simulator prices each candidate with
// the chain's copy engines and the fastest that fits the real budget wins.
// `optimal` at the budget itself is one candidate, so `swap` is never slower than
// recompute-only; on a chain without a host link it is `optimal`. The
// other exact candidate is the dynamic program with offload as a third
// option (OptimalPlanner with offloads): the optimum of the persistent class
// whose checkpoints may go to host memory between their forward segment and
// their recomputation. With the weights in host memory it is Harmony
// (GroupedSwapPlanner).
#pragma once

#include "plan/optimal_planner.h"
#include "plan/planner.h"
#include "plan/weight_swap_planners.h"

namespace memtrain::plan {

class SwapPlanner : public Planner {
 public:
  explicit SwapPlanner(PlannerOptions options = {})
      : optimal_(options), exact_offload_(options, false, true), grouped_(options) {}
  std::string name() const override { return "swap"; }
  static constexpr PlannerTraits kTraits{.plans_weights_on_host = true, .uses_host_link = true};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;

  static constexpr int kLargerBudgets = 16;      // candidates above the budget
  static constexpr int kOffloadedPrefixes = 16;  // candidates offloading the first stages
  // The k-th larger budget, 0 <= k <= kLargerBudgets, from `budget` (k = 0)
  // to `keep_peak`. Quadratic spacing: offloaded checkpoints free a few
  // activations' worth, so most candidates sit just above the budget.
  static Bytes larger_budget(int k, Bytes budget, Bytes keep_peak);

 private:
  OptimalPlanner optimal_;
  OptimalPlanner exact_offload_;  // the dynamic program with offloads
  GroupedSwapPlanner grouped_;    // for chains with weights in host memory
};

}  // namespace memtrain::plan
