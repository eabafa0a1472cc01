#pragma once

#include "plan/planner.h"

namespace memtrain::plan {

// `all`: checkpoint every stage but the loss; each is recomputed once.
class AllPlanner : public Planner {
 public:
  std::string name() const override { return "all"; }
  static constexpr PlannerTraits kTraits{.local_recompute = PlannerTraits::LocalRecompute::Always};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;
};

}  // namespace memtrain::plan
