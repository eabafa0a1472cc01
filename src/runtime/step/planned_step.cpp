#include "runtime/step/planned_step.h"

#include "plan/frugal_schedule.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

void refuse_below_least(StepPlanner& step_planner, const Chain& largest, Bytes planning_budget, const Signature& input,
                        Bytes reserve) {
  plan::Planner& planner = step_planner.planner();
  if (!planner.respects_budget()) return;
  const Plan p = planner.plan({largest, planning_budget, &largest});
  if (p.feasible) return;
  std::string what = "input " + input.describe();
  // Where even the least-memory schedule peaks between steps (the optimizer's
  // update beside the weights, the gradients and its state), the input is
  // not what to cut: say so, or a loop shrinks its batch to no avail.
  const Schedule frugal = plan::most_frugal_schedule(planner, largest, &largest, step_planner.fallback_schedule());
  if (sim::simulate(largest, frugal).peak_op < 0) {
    // Between steps run the optimizer's update and, from Python, the
    // backward of the code before the first stage: either may set it.
    what += ", at its peak between steps (" + format_bytes(largest.update_temp_bytes) +
            " there: the optimizer's update, and the backward of any code before the first stage) beside the "
            "weights, their gradients and any optimizer's state, which no schedule and no smaller input lowers";
  }
  throw below_least(planning_budget + reserve, p.min_budget_bytes + reserve, planner.name(), what);
}

PlannedStep::PlannedStep(StepPlanner& step_planner, Start start, StepGuard guard, std::optional<StepChoice> given)
    : step_planner_(step_planner), start_(std::move(start)), guard_(std::move(guard)),
      choice_(given ? std::move(*given) : step_planner_.choose(start_.size, start_.steps_before)) {}

const StepChoice& PlannedStep::retry(const OutOfBudget& why) {
  guard_.roll_back();
  choice_ = step_planner_.retry(start_.size, choice_, attempts_, start_.where, why);
  return choice_;
}

Bytes PlannedStep::finish(const Signature& at, const ExecutionResult& result, Bytes measured_peak,
                          Bytes update_temp_bytes, std::optional<Bytes> predicted_peak) {
  Bytes predicted = -1;
  if (choice_.kind != PlanKind::Collect) {
    // Predicted before the predictor learns this step.
    predicted = predicted_peak ? *predicted_peak
                               : sim::simulate(step_planner_.predicted_chain(start_.size), choice_.schedule).peak_bytes;
    step_planner_.observe_peak(start_.size, predicted, measured_peak);
  }
  step_planner_.learn(at, result, update_temp_bytes);
  return predicted;
}

}  // namespace memtrain::runtime
