#include "plan/tradeoff_curve.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"

namespace memtrain::plan {

std::vector<TradeoffPoint> tradeoff_curve(const Chain& chain, const std::vector<std::string>& planners, int points,
                                          const PlannerOptions& options) {
  if (points < 2) throw UsageError("a trade-off curve needs at least 2 points, not " + std::to_string(points));
  std::vector<std::unique_ptr<Planner>> made;
  for (const std::string& name : planners) made.push_back(make_planner(name, options));
  const Bytes top = keep_everything_peak(chain);
  Bytes low = top;
  for (auto& p : made) {
    if (!p->respects_budget()) continue;
    const Plan nothing = p->plan({chain, 0, &chain});
    low = std::min(low, nothing.feasible ? nothing.peak_bytes : nothing.min_budget_bytes);
  }
  std::vector<TradeoffPoint> out;
  for (int k = 0; k < points; ++k) {
    const Bytes budget = low + (top - low) * k / (points - 1);
    for (auto& p : made) {
      const Plan plan = p->plan({chain, budget, &chain});
      TradeoffPoint t;
      t.planner = p->name();
      t.budget_bytes = budget;
      t.budget_fraction = static_cast<double>(budget) / static_cast<double>(top);
      t.feasible = plan.feasible;
      if (plan.feasible) {
        t.time = plan.time;
        t.peak_bytes = plan.peak_bytes;
        t.recomputed_forwards = plan.schedule.recomputed_forwards(chain.size());
      }
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace memtrain::plan
