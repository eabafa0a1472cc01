// `tensile`: TENSILE's per-tensor schedule for one job (Zhang et al.). From
// keeping everything, the step's peak is lowered tensor by tensor:
// - swap first: each stored tensor (a stage's saved state, a checkpoint)
//   whose copy to host fits a free slot of the job's copy timeline and whose
//   copy back, placed as late as possible before its read, still hides
//   (with_hidden_offloads' rule) is a candidate; the largest candidates are
//   swapped, one at a time, until the peak fits;
// - recompute only when no swap fits: the stage with the largest saved
//   bytes per second of recomputation is recomputed, and the swaps are
//   chosen again.
// Unlike `swap` and `optimal` it does not search for the fastest schedule:
// it takes the first that fits, as TENSILE does.
#pragma once

#include <vector>

#include "plan/planner.h"

namespace memtrain::plan {

class TensilePlanner : public Planner {
 public:
  std::string name() const override { return "tensile"; }
  static constexpr PlannerTraits kTraits{.uses_host_link = true};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;
};

// The bytes of each stored tensor of `chain` whose copies to host and back
// hide under the compute of the schedule keeping everything, largest first:
// what TENSILE can swap without slowing the step.
std::vector<Bytes> swappable_tensor_bytes(const Chain& chain);

}  // namespace memtrain::plan
