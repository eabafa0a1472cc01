#pragma once

#include <vector>

#include "plan/planner.h"

namespace memtrain::plan {

// `sqrt` (Chen et al., 2016): ceil(sqrt(L)) segments of equal length; only
// segment inputs are kept in the forward pass.
class SqrtPlanner : public Planner {
 public:
  std::string name() const override { return "sqrt"; }
  static constexpr PlannerTraits kTraits{};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;

  // First stage of each segment for a chain of `stages` stages.
  static std::vector<int> segment_starts(int stages);
};

}  // namespace memtrain::plan
