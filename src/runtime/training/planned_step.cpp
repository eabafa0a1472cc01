#include "runtime/training/planned_step.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include "plan/frugal_schedule.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

void refuse_below_least(StepPlanner& steps, const Chain& largest, Bytes planning_budget, const Signature& input,
                        Bytes reserve) {
  plan::Planner& planner = steps.planner();
  if (!planner.respects_budget()) return;
  const Plan p = planner.plan({largest, planning_budget, &largest});
  if (p.feasible) return;
  std::string what = "input " + input.describe();
  // Where even the least-memory schedule peaks between steps (the optimizer's
  // update beside the weights, the gradients and its state), the input is
  // not what to cut: say so, or a loop shrinks its batch to no avail.
  const Schedule frugal = plan::most_frugal_schedule(planner, largest, &largest, steps.fallback_schedule());
  if (sim::simulate(largest, frugal).peak_op < 0) {
    what += ", at its peak between steps: the optimizer's update (" + format_bytes(largest.update_temp_bytes) +
            ") beside the weights, their gradients and the optimizer's state, which no schedule and no smaller "
            "input lowers";
  }
  throw below_least(planning_budget + reserve, p.min_budget_bytes + reserve, planner.name(), what);
}

void refuse_update_without_room(DeviceMemory& memory, Bytes budget, Bytes temporary, const std::string& where) {
  // The allocator's counts are current without waiting for the device.
  const Bytes live = memory.live();
  if (memory.enforced() && live + temporary > budget) {
    throw Error(where + ": budget " + format_bytes(budget) + " leaves no room for the optimizer update (" +
                format_bytes(temporary) + " on top of " + format_bytes(live) + ")");
  }
}

at::Generator default_generator_of(const torch::Device& device) {
  return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
}

StepGuard::StepGuard(DeviceMemory& memory, std::optional<Bytes> budget, bool enforce, const at::Generator& generator,
                     StagedModel* model)
    : memory_(memory), enforce_(enforce), generator_(generator), rng_(RngSnapshot::capture(generator)) {
  if (model) buffers_ = BufferSnapshot::capture(*model, memory_);
  if (budget) memory_.set_budget(*budget);
  enforce_again();
}

void StepGuard::roll_back() const {
  if (buffers_) buffers_->restore();
  rng_.restore(generator_);
}

void StepGuard::enforce_again() {
  enforcement_.reset();
  enforcement_ = std::make_unique<EnforcementScope>(memory_, enforce_, /*after=*/false);
}

PlannedStep::PlannedStep(StepPlanner& steps, Start start, StepGuard guard, std::optional<StepChoice> given)
    : steps_(steps), start_(std::move(start)), guard_(std::move(guard)),
      choice_(given ? std::move(*given) : steps_.choose(start_.size, start_.steps_before)) {}

const StepChoice& PlannedStep::retry(const OutOfBudget& why) {
  guard_.roll_back();
  choice_ = steps_.retry(start_.size, choice_, attempts_, start_.where, why);
  return choice_;
}

Bytes PlannedStep::finish(const Signature& at, const ExecutionResult& result, Bytes measured_peak,
                          Bytes update_temp_bytes, std::optional<Bytes> predicted_peak) {
  Bytes predicted = -1;
  if (choice_.kind != PlanKind::Collect) {
    // Predicted before the predictor learns this step.
    predicted = predicted_peak ? *predicted_peak
                               : sim::simulate(steps_.predicted_chain(start_.size), choice_.schedule).peak_bytes;
    steps_.observe_peak(start_.size, predicted, measured_peak);
  }
  steps_.learn(at, result, update_temp_bytes);
  return predicted;
}

}  // namespace memtrain::runtime
