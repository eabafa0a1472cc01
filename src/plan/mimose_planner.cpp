// Mimose prices each greedy pick with the Simulator instead of subtracting
// savings from one deficit computed up front: a checkpointed stage brings its
// saved bytes back during its recomputation, so the true peak moves less than
// the sum of savings says. Each pick costs one O(n) simulation.
#include "plan/mimose_planner.h"

#include "plan/schedule_builders.h"
#include "sim/simulator.h"

namespace memtrain::plan {

RecomputeChoice mimose_choice(const Chain& chain, Bytes budget) {
  const int n = chain.size();
  RecomputeChoice c;
  c.recompute.assign(n, 0);
  // What checkpointing stage i saves until it is recomputed: x̄_i is replaced
  // by its output x_{i+1}. Stages that save nothing are not candidates.
  std::vector<Bytes> saving(n, 0);
  for (int i = 0; i + 1 < n; ++i) {
    saving[i] = chain.stages[i].saved_bytes - chain.activation_bytes(i + 1);
  }
  while (true) {
    const Bytes peak = sim::simulate(chain, schedule_with_recompute(c.recompute)).peak_bytes;
    const Bytes deficit = peak - budget;
    if (deficit <= 0) {
      c.fits = true;
      break;
    }
    int cover = -1, largest = -1;
    for (int i = 0; i + 1 < n; ++i) {
      if (c.recompute[i] || saving[i] <= 0) continue;
      if (saving[i] >= deficit && (cover < 0 || saving[i] < saving[cover])) cover = i;
      if (largest < 0 || saving[i] > saving[largest]) largest = i;
    }
    const int pick = cover >= 0 ? cover : largest;
    if (pick < 0) {
      c.least_budget = peak;  // every candidate is checkpointed already
      break;
    }
    c.recompute[pick] = 1;
  }
  return c;
}

Plan MimosePlanner::plan(const PlanRequest& request) {
  const RecomputeChoice c = mimose_choice(request.chain, request.budget);
  return priced_plan(name(), request.chain, schedule_with_recompute(c.recompute), request.budget,
                     c.fits ? -1 : c.least_budget);
}

}  // namespace memtrain::plan
