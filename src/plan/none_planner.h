#pragma once

#include "plan/planner.h"

namespace memtrain::plan {

class NonePlanner : public Planner {
 public:
  std::string name() const override { return "none"; }
  static constexpr PlannerTraits kTraits{.respects_budget = false,
                                         .local_recompute = PlannerTraits::LocalRecompute::Always};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;
};

}  // namespace memtrain::plan
