// One step under the budget, the part every front end drives the same way:
// the Trainer (the CLI's models), BlockSteps (the Python module's blocks)
// and, through its StepGuard, the GraphTrainer. Mimose's loop itself
// (choosing a schedule per size, the retry ladder, the predictor) is the
// StepPlanner's (step_planner.h); this is one step's life around it, in
// order:
//
// 1. once, after calibration: the budget checked against the largest input
//    (refuse_below_least), so a run that cannot fit stops before its first
//    step, naming the least budget;
// 2. the schedule chosen for the step's size;
// 3. the budget enforced while the step runs (StepGuard, a scoped guard);
// 4. an attempt that runs out of budget rolled back (the random generators
//    and the model's buffers as the step found them) and the next, stricter
//    schedule chosen;
// 5. once the step has run: the peak it was predicted to reach, and what the
//    step planner learns from it.
//
// The front end runs the schedule and keeps what is its own: the gradients
// an attempt left, its optimizer, the parts a step is split into, its record.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/chain.h"
#include "core/signature.h"
#include "core/units.h"
#include "runtime/execution/executor.h"
#include "runtime/step/step_guard.h"
#include "runtime/step/step_planner.h"

namespace memtrain::runtime {

// Throws Infeasible (below_least) when the step planner's planner cannot
// plan `largest` (the largest input's chain, of input `input`) within
// `planning_budget`; `reserve` is what the run's budget holds beyond the
// planning budget (the ranks' gradient sums), added to the least named.
void refuse_below_least(StepPlanner& step_planner, const Chain& largest, Bytes planning_budget, const Signature& input,
                        Bytes reserve = 0);

// One planned step of a chain (the Trainer's, BlockSteps'): its schedule,
// its attempts, what it teaches the step planner.
class PlannedStep {
 public:
  struct Start {
    std::int64_t size = 0;  // the input size the step is planned at
    long steps_before = 0;  // steps this front end ran before it
    std::string where;      // "step N: input [..]", for the errors retries throw
  };
  // Chooses the step's schedule (StepPlanner::choose), or runs `given` (a
  // calibration's measurement) when it is set; then holds `guard`'s budget.
  PlannedStep(StepPlanner& step_planner, Start start, StepGuard guard, std::optional<StepChoice> given = std::nullopt);

  StepChoice& choice() { return choice_; }
  const StepChoice& choice() const { return choice_; }
  int retries() const { return attempts_.retries; }
  StepGuard& guard() { return guard_; }

  // The attempt ran out of budget (`why`): rolled back, the next schedule
  // chosen (StepPlanner::retry; throws Error when none is left).
  const StepChoice& retry(const OutOfBudget& why);
  // The step ran `result` (at `at`: its input, or its largest part's) and,
  // with its optimizer's update, peaked at `measured_peak`. A planned step
  // teaches the step planner its peak against `predicted_peak` (the
  // Simulator's for its schedule when unset) and the predictor its sample,
  // with the update's `update_temp_bytes`. Returns the predicted peak, -1
  // for a collection step, which predicts nothing.
  Bytes finish(const Signature& at, const ExecutionResult& result, Bytes measured_peak, Bytes update_temp_bytes,
               std::optional<Bytes> predicted_peak = std::nullopt);

 private:
  StepPlanner& step_planner_;
  Start start_;
  StepGuard guard_;
  StepChoice choice_;
  StepAttempts attempts_;
};

}  // namespace memtrain::runtime
