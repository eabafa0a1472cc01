// A user's model cut into stages, trained under a budget with the user's own
// loss and optimizer: Mimose's loop, as the Trainer runs it (one
// runtime::StepPlanner: a cached plan for this input size, or the
// predictor's chain and a new plan; run; retry; teach the predictor), split
// in two where the user's loss runs.
//
// begin(x) starts the step's schedule on a worker thread and returns once
// the schedule has computed the model's output; the caller computes its loss
// and its gradient dy, and finish(dy) lets the schedule's backward run
// (recomputing and reloading as planned) and returns the gradient of x.
// Parameters' gradients accumulate into their .grad, as autograd's would.
// The worker runs the one schedule interpreter with the LibTorch backend,
// unchanged; only the last stage (GradientBoundary) waits for dy.
//
// A step that runs out of budget is rolled back and retried under a stricter
// plan, losing nothing, when that can be done exactly: before its output is
// computed, always; during its backward, when the parameters had no
// gradients when its dy arrived (zero_grad(set_to_none=True)), using a host copy
// of dy and replaying the random generators. Otherwise it throws, its
// gradients partial, and the next plan for that input size is stricter.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/chain.h"
#include "core/error.h"
#include "core/signature.h"
#include "core/units.h"
#include "plan/planner.h"
#include "python/gradient_boundary.h"
#include "runtime/execution/executor.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/rng_snapshot.h"
#include "runtime/model/staged_model.h"
#include "runtime/training/step_planner.h"

namespace memtrain::python {

// A budget below what the planner needs for the calibration input.
class Infeasible : public Error {
 public:
  Infeasible(const std::string& what, Bytes min_bytes) : Error(what), min_bytes_(min_bytes) {}
  Bytes min_bytes() const { return min_bytes_; }

 private:
  Bytes min_bytes_;
};

struct PlannedStagesOptions {
  // Mimose's loop, as the Trainer runs it. Its bucket width 0: 1/64 of the
  // largest size seen when the predictor first could plan.
  runtime::StepPlannerOptions steps;
  BudgetSpec budget = {false, 0, 0};
};

// What the last step did.
struct StepReport {
  long step = 0;
  runtime::PlanKind plan = runtime::PlanKind::New;
  Signature signature;
  Schedule schedule;
  Bytes peak_bytes = 0;
  Bytes predicted_peak_bytes = -1;  // -1: a collection step, nothing predicted
  Bytes budget_bytes = 0;
  int retries = 0;
  Seconds seconds = 0;  // from begin to the end of the backward, the caller's loss included
};

class PlannedStages {
 public:
  // `model`'s last stage must be `boundary`. `memory` outlives this.
  PlannedStages(runtime::StagedModel model, GradientBoundary* boundary, runtime::DeviceMemory& memory,
                PlannedStagesOptions options);
  ~PlannedStages();
  PlannedStages(const PlannedStages&) = delete;
  PlannedStages& operator=(const PlannedStages&) = delete;

  // Measures `sample` (the largest input the caller expects): the budget's
  // reference (N% of the peak with every activation kept) and a first chain
  // for the predictor. Gradients, generators and buffers are left as found.
  // Throws memtrain::Error when the budget is below what the planner needs
  // for `sample`. Without it, N% budgets are refused.
  void calibrate(const torch::Tensor& sample);

  torch::Tensor begin(const torch::Tensor& x);
  torch::Tensor finish(const torch::Tensor& dy);
  // Abandons a begun step (its output was dropped without a backward).
  void cancel();

  const StepReport& last_step() const { return last_; }
  Bytes budget_bytes() const { return budget_; }
  Bytes reference_peak_bytes() const { return reference_peak_; }
  // The predictor's chain for the largest input seen (or calibrated on).
  Chain largest_chain() const { return steps_.largest_chain(); }
  bool has_chain() const { return steps_.predictor().ready(); }
  const plan::Planner& planner() const { return steps_.planner(); }
  runtime::StagedModel& model() { return model_; }

 private:
  enum class Phase { Idle, Forward, AtBoundary, Backward, Done };
  void worker_loop();
  void run_step(const torch::Tensor& x);           // on the worker
  void calibrate_on(const runtime::Batch& batch);  // on the worker
  runtime::ExecutionResult run_with_retries(const runtime::Batch& batch, std::int64_t size);
  // What is alive beyond the model, its gradients and the batch (the caller's
  // own tensors, its optimizer's state): every plan leaves room for it.
  void note_resident(const runtime::Batch& batch);
  torch::Tensor exchange(const torch::Tensor& output);  // the boundary's, on the worker
  void wait_for(std::unique_lock<std::mutex>& lock, Phase phase);
  void rethrow_failure();

  runtime::StagedModel model_;
  GradientBoundary* boundary_;
  runtime::DeviceMemory& memory_;
  PlannedStagesOptions options_;
  runtime::StepPlanner steps_;
  std::unique_ptr<runtime::Executor> executor_;
  Bytes budget_ = 0;
  Bytes reference_peak_ = 0;
  long steps_run_ = 0;
  StepReport last_, current_;
  runtime::StepChoice choice_;  // the running step's schedule

  // The hand-over between the caller's thread and the worker.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Phase phase_ = Phase::Idle;
  bool has_task_ = false, stopping_ = false, cancelled_ = false, has_dy_ = false;
  bool synthetic_dy_ = false;  // calibration: dy = ones, no caller
  // Retrying a backward: whether there were no gradients when dy arrived, dy's host
  // copy, and the generators as they were when dy arrived.
  bool can_retry_backward_ = false, replay_dy_ = false;
  torch::Tensor kept_dy_;
  std::optional<runtime::RngSnapshot> after_caller_;
  torch::Tensor task_input_, output_, dy_, dx_;
  std::exception_ptr failure_;
  int threads_ = 0;  // the caller's intra-op thread count, for the worker
  std::thread worker_;
};

}  // namespace memtrain::python
