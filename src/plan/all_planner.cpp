#include "plan/all_planner.h"

#include "plan/schedule_builders.h"

namespace memtrain::plan {

Plan AllPlanner::plan(const PlanRequest& request) {
  return priced_plan(name(), request.chain, schedule_checkpointing_everything(request.chain.size()), request.budget);
}

}  // namespace memtrain::plan
