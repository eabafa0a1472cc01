#pragma once

#include "plan/planner.h"

namespace memtrain::plan {

// `all`: checkpoint every stage but the loss; each is recomputed once.
class AllPlanner : public Planner {
 public:
  std::string name() const override { return "all"; }
  bool recomputes_locally() const override { return true; }  // each stage on its own
  Plan plan(const PlanRequest& request) override;
};

}  // namespace memtrain::plan
