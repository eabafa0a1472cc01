// Simulated step time over budget for several planners on one chain: the
// memory/time trade-off curve `memtrain plan --sweep` prints and plots.
#pragma once

#include <string>
#include <vector>

#include "core/chain.h"
#include "plan/planner.h"

namespace memtrain::plan {

struct TradeoffPoint {
  std::string planner;
  Bytes budget_bytes = 0;
  double budget_fraction = 0;  // of the peak with nothing recomputed
  bool feasible = false;
  Seconds time = 0;      // simulated, when feasible
  Bytes peak_bytes = 0;  // simulated, when feasible
  int recomputed_forwards = 0;
};

// `points` budgets evenly spaced from the least budget any of `planners`
// can work with up to the peak with nothing recomputed; every planner at
// every budget. Throws UsageError for points < 2 or an unknown planner.
std::vector<TradeoffPoint> tradeoff_curve(const Chain& chain, const std::vector<std::string>& planners, int points,
                                          const PlannerOptions& options = {});

}  // namespace memtrain::plan
