#include "plan/swap_planner.h"

#include <cstdio>
#include <string>

#include "plan/offload_insertion.h"
#include "plan/schedule_builders.h"

namespace memtrain::plan {

Bytes SwapPlanner::larger_budget(int k, Bytes budget, Bytes keep_peak) {
  const double x = static_cast<double>(k) / kLargerBudgets;
  return budget + static_cast<Bytes>(static_cast<double>(keep_peak - budget) * x * x);
}

Plan SwapPlanner::plan(const PlanRequest& request) {
  const Chain& chain = request.chain;
  if (chain.weights_on_host) return grouped_.plan(request);
  const Plan at_budget = optimal_.plan(request);
  Plan best = at_budget;
  best.planner = name();
  if (!(chain.device_to_host_bandwidth > 0) || !(chain.host_to_device_bandwidth > 0)) return best;
  const Bytes keep_peak =
      priced_plan(name(), chain, schedule_keeping_everything(chain.size()), request.budget).peak_bytes;
  if (keep_peak <= request.budget) return best;  // nothing to offload

  int offloaded = 0;
  // How the winning candidate's recompute schedule was planned.
  std::string origin = "optimal's schedule for " + std::to_string(request.budget) + " bytes";
  // Adds the hidden offloads to a recompute schedule, drops those the
  // budget does not need, and keeps the result if it fits and is faster.
  auto consider = [&](const Plan& recompute, const std::string& how) {
    if (!recompute.feasible) return;
    Plan candidate = priced_plan(name(), chain, with_hidden_offloads(chain, recompute.schedule), request.budget);
    if (!candidate.feasible) return;
    candidate = priced_plan(name(), chain, without_needless_offloads(chain, candidate.schedule, request.budget),
                            request.budget);
    if (!best.feasible || candidate.time < best.time) {
      best = candidate;
      origin = how;
      offloaded = 0;
      for (const Op& op : best.schedule.ops) offloaded += op.kind == OpKind::Offload || op.kind == OpKind::OffloadSaved;
    }
  };
  for (int k = 0; k <= kLargerBudgets; ++k) {
    const Bytes larger = larger_budget(k, request.budget, keep_peak);
    consider(k == 0 ? at_budget : optimal_.plan({chain, larger, request.largest}),
             "optimal's schedule for " + std::to_string(larger) + " bytes");
  }
  // Offload early, recompute late. `optimal` never pairs the two: at any
  // budget it recomputes whichever stages are cheapest, early ones included,
  // while copies hide best for early stages, whose tensors idle longest and
  // whose copies start first. So plan as if the first j stages' saved
  // tensors cost nothing, and let the copies (where they hide) make it so.
  // At most kOffloadedPrefixes of them, spread evenly, so planning stays
  // quick on long chains.
  int previous = 0;
  for (int k = 1; k <= kOffloadedPrefixes; ++k) {
    const int j = static_cast<int>(static_cast<long long>(k) * (chain.size() - 1) / kOffloadedPrefixes);
    if (j <= previous) continue;
    previous = j;
    Chain assumed = chain;
    for (int i = 0; i < j; ++i) assumed.stages[static_cast<size_t>(i)].saved_bytes = 0;
    consider(optimal_.plan({assumed, request.budget, request.largest}),
             "optimal's schedule with stages 0.." + std::to_string(j - 1) + "'s saved tensors counted as offloaded");
  }
  const Plan exact = exact_offload_.plan(request);
  if (exact.feasible && (!best.feasible || exact.time < best.time)) {
    best = exact;
    best.planner = name();
    best.note = "the dynamic program with offloads: " + exact.note;
  } else if (best.feasible) {
    char note[120];
    std::snprintf(note, sizeof note, ", %d stored activations offloaded: %d recomputed forwards", offloaded,
                  best.schedule.recomputed_forwards(chain.size()));
    best.note = origin + note;
  }
  return best;
}

}  // namespace memtrain::plan
