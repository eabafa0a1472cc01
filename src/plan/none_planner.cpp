// `none`: keep everything, recompute nothing. The fastest schedule and the
// hungriest; the trainer runs it without enforcing the budget.
#include "plan/none_planner.h"

#include "plan/schedule_builders.h"

namespace memtrain::plan {

Plan NonePlanner::plan(const PlanRequest& request) {
  return priced_plan(name(), request.chain, schedule_keeping_everything(request.chain.size()), request.budget);
}

}  // namespace memtrain::plan
