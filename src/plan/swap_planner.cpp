#include "plan/swap_planner.h"

#include <cstdio>

#include "plan/offload_insertion.h"
#include "plan/schedule_builders.h"

namespace memtrain::plan {

Plan SwapPlanner::plan(const PlanRequest& request) {
  const Chain& chain = request.chain;
  if (chain.weights_on_host) return grouped_.plan(request);
  const Plan at_budget = optimal_.plan(request);
  Plan best = at_budget;
  best.planner = name();
  if (!(chain.device_to_host_bandwidth > 0) || !(chain.host_to_device_bandwidth > 0)) return best;
  const Bytes keep_peak = priced_plan(name(), chain, schedule_keeping_everything(chain.size()), request.budget).peak_bytes;
  if (keep_peak <= request.budget) return best;  // nothing to offload

  int offloaded = 0;
  Bytes planned_for = request.budget;
  for (int k = 0; k <= kLargerBudgets; ++k) {
    // Quadratic spacing: offloaded checkpoints free a few activations' worth,
    // so most candidates sit just above the budget.
    const double x = static_cast<double>(k) / kLargerBudgets;
    const Bytes larger = request.budget + static_cast<Bytes>(static_cast<double>(keep_peak - request.budget) * x * x);
    const Plan recompute = k == 0 ? at_budget : optimal_.plan({chain, larger, request.largest});
    if (!recompute.feasible) continue;
    Plan candidate = priced_plan(name(), chain, with_hidden_offloads(chain, recompute.schedule), request.budget);
    if (!candidate.feasible) continue;
    candidate = priced_plan(name(), chain, without_needless_offloads(chain, candidate.schedule, request.budget), request.budget);
    if (!best.feasible || candidate.time < best.time) {
      best = candidate;
      planned_for = larger;
      offloaded = 0;
      for (const Op& op : best.schedule.ops) offloaded += op.kind == OpKind::Offload || op.kind == OpKind::OffloadSaved;
    }
  }
  const Plan exact = exact_offload_.plan(request);
  if (exact.feasible && (!best.feasible || exact.time < best.time)) {
    best = exact;
    best.planner = name();
    best.note = "the dynamic program with offloads: " + exact.note;
  } else if (best.feasible) {
    char note[200];
    std::snprintf(note, sizeof note, "optimal's schedule for %lld bytes, %d stored activations offloaded: %d recomputed forwards",
                  static_cast<long long>(planned_for), offloaded, best.schedule.recomputed_forwards(chain.size()));
    best.note = note;
  }
  return best;
}

}  // namespace memtrain::plan
