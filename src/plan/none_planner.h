#pragma once

#include "plan/planner.h"

namespace memtrain::plan {

class NonePlanner : public Planner {
 public:
  std::string name() const override { return "none"; }
  bool recomputes_locally() const override { return true; }  // each stage on its own
  bool respects_budget() const override { return false; }
  Plan plan(const PlanRequest& request) override;
};

}  // namespace memtrain::plan
