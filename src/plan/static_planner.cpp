#include "plan/static_planner.h"

#include "core/error.h"
#include "plan/mimose_planner.h"
#include "plan/schedule_builders.h"

namespace memtrain::plan {

Plan StaticPlanner::plan(const PlanRequest& request) {
  if (!recompute_) {
    const Chain& largest = request.largest ? *request.largest : request.chain;
    RecomputeChoice c = mimose_choice(largest, request.budget);
    if (!c.fits) least_budget_ = c.least_budget;
    recompute_ = std::move(c.recompute);
  }
  if (static_cast<int>(recompute_->size()) != request.chain.size()) {
    throw Error("static planner: planned once for a chain of " + std::to_string(recompute_->size()) +
                " stages, now asked for one of " + std::to_string(request.chain.size()) +
                "; use one static planner per model");
  }
  return priced_plan(name(), request.chain, schedule_with_recompute(*recompute_), request.budget, least_budget_);
}

}  // namespace memtrain::plan
