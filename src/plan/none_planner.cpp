// `none`: keep everything, recompute nothing. The fastest schedule and the
// hungriest; the trainer runs it without enforcing the budget.
#include "plan/none_planner.h"

#include "plan/schedule_builders.h"

namespace memtrain::plan {

Plan NonePlanner::plan(const PlanRequest& request) {
  const std::vector<char> keep_all(request.chain.size(), 0);
  return priced_plan(name(), request.chain, schedule_with_recompute(keep_all), request.budget);
}

}  // namespace memtrain::plan
