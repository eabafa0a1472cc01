#pragma once

#include <vector>

#include "plan/planner.h"

namespace memtrain::plan {

// `mimose` (Liao et al., 2023): greedy checkpoint selection for this input.
// deficit = simulated peak - budget; among the stages not yet checkpointed,
// checkpoint the one with the smallest saving that covers the deficit, else
// the one with the largest saving; repeat until the schedule fits.
class MimosePlanner : public Planner {
 public:
  std::string name() const override { return "mimose"; }
  static constexpr PlannerTraits kTraits{.local_recompute = PlannerTraits::LocalRecompute::Always};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;
};

struct RecomputeChoice {
  std::vector<char> recompute;  // per stage: checkpointed (1) or kept (0)
  bool fits = false;            // the schedule's simulated peak is within budget
  Bytes least_budget = 0;       // when it does not fit: peak with every candidate checkpointed
};

// The greedy itself, shared with `static`.
RecomputeChoice mimose_choice(const Chain& chain, Bytes budget);

}  // namespace memtrain::plan
