#pragma once

#include <optional>
#include <vector>

#include "plan/planner.h"

namespace memtrain::plan {

// `static`: the baseline that ignores input dynamics. On its first call it
// runs Mimose's greedy once for the dataset's largest input (the request's
// `largest` chain, else the chain it is given) and then applies that same
// set of checkpoints to every input.
class StaticPlanner : public Planner {
 public:
  std::string name() const override { return "static"; }
  static constexpr PlannerTraits kTraits{.local_recompute = PlannerTraits::LocalRecompute::Always};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;

 private:
  std::optional<std::vector<char>> recompute_;  // decided once, then reused
  Bytes least_budget_ = -1;                     // when the largest input does not fit
};

}  // namespace memtrain::plan
