#include "plan/weight_swap_planners.h"

#include <string>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "plan/weight_swap_schedules.h"

namespace memtrain::plan {

namespace {

void need_weights_on_host(const Chain& chain, const std::string& planner) {
  if (!chain.weights_on_host) {
    throw UsageError("planner " + planner + " swaps weights; it needs them in host memory (Chain::weights_on_host)");
  }
}

// Whether priced plan `b` is better than `a`: feasible beats infeasible,
// then the faster wins, and of two infeasible ones the one needing less memory.
bool beats(const Plan& b, const Plan& a) {
  if (a.feasible != b.feasible) return b.feasible;
  if (a.feasible) return b.time < a.time;
  return b.min_budget_bytes < a.min_budget_bytes;
}

}  // namespace

Plan GroupedSwapPlanner::plan(const PlanRequest& request) {
  const Chain& chain = request.chain;
  need_weights_on_host(chain, name());
  const int n = chain.size();
  Plan best;
  int best_packs = 0;
  bool best_offloads = false;
  for (int packs = 1; packs <= n; ++packs) {
    const std::vector<int> starts = balanced_pack_starts(chain, packs);
    for (bool offload : {false, true}) {
      if (offload && packs == 1) continue;  // one pack's input is the batch
      for (bool lookahead : {false, true}) {
        Plan p =
            priced_plan(name(), chain, grouped_swap_schedule(n, options_.micro_batches, starts, lookahead, offload),
                        request.budget);
        if (best_packs == 0 || beats(p, best)) {
          best = std::move(p);
          best_packs = packs;
          best_offloads = offload;
        }
      }
    }
  }
  best.planner = name();
  if (best.feasible) {
    best.note = std::to_string(best_packs) + " layer packs, " + std::to_string(options_.micro_batches) +
                " micro-batches grouped" + (best_offloads ? ", pack inputs offloaded" : "");
  }
  return best;
}

Plan PerLayerSwapPlanner::plan(const PlanRequest& request) {
  const Chain& chain = request.chain;
  need_weights_on_host(chain, name());
  Plan best =
      priced_plan(name(), chain, per_layer_swap_schedule(chain.size(), options_.micro_batches, true), request.budget);
  Plan plain =
      priced_plan(name(), chain, per_layer_swap_schedule(chain.size(), options_.micro_batches, false), request.budget);
  if (beats(plain, best)) best = std::move(plain);
  best.planner = name();
  return best;
}

}  // namespace memtrain::plan
