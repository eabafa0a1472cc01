#include "plan/all_planner.h"

#include "plan/schedule_builders.h"

namespace memtrain::plan {

Plan AllPlanner::plan(const PlanRequest& request) {
  const std::vector<char> recompute_all(request.chain.size(), 1);
  return priced_plan(name(), request.chain, schedule_with_recompute(recompute_all), request.budget);
}

}  // namespace memtrain::plan
