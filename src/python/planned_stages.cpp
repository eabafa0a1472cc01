#include "python/planned_stages.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/seconds_since.h"
#include "plan/schedule_builders.h"
#include "python/step_input.h"
#include "runtime/execution/chain_measurement.h"
#include "runtime/memory/counting_allocator.h"
#include "runtime/model/buffer_snapshot.h"
#include "runtime/model/rng_snapshot.h"
#include "sim/simulator.h"

namespace memtrain::python {

namespace {

using Clock = std::chrono::steady_clock;

// Thrown on the worker when the caller abandons a step at the boundary.
struct StepCancelled {};

}  // namespace

PlannedStages::PlannedStages(runtime::StagedModel model, GradientBoundary* boundary, runtime::DeviceMemory& memory,
                             PlannedStagesOptions options)
    : model_(std::move(model)), boundary_(boundary), memory_(memory), options_(std::move(options)),
      steps_(options_.steps, model_, runtime::stage_constants(model_, /*optimizer_slots=*/0)) {
  MEMTRAIN_ASSERT(model_.size() >= 2 && &model_.stage(model_.size() - 1) == boundary_,
                  "the gradient boundary is the last of at least two stages");
  if (!options_.budget.is_percent) budget_ = options_.budget.bytes;
  executor_ = std::make_unique<runtime::Executor>(model_, memory_);
  boundary_->set_exchange([this](const torch::Tensor& output) { return exchange(output); });
  threads_ = at::get_num_threads();
  worker_ = std::thread([this] { worker_loop(); });
}

PlannedStages::~PlannedStages() {
  cancel();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void PlannedStages::worker_loop() {
  const auto scope = memory_.activate();
  int threads = 0;
  while (true) {
    torch::Tensor input;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return has_task_ || stopping_; });
      if (stopping_) return;
      has_task_ = false;
      input = std::move(task_input_);
      if (threads != threads_) at::set_num_threads(threads = threads_);
    }
    std::exception_ptr failure;
    try {
      run_step(input);
    } catch (const StepCancelled&) {
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = failure;
      phase_ = Phase::Done;
    }
    changed_.notify_all();
  }
}

torch::Tensor PlannedStages::exchange(const torch::Tensor& output) {
  if (synthetic_dy_) return torch::ones_like(output);
  if (replay_dy_) return kept_dy_.clone();
  std::unique_lock<std::mutex> lock(mutex_);
  output_ = output.detach();
  phase_ = Phase::AtBoundary;
  changed_.notify_all();
  changed_.wait(lock, [&] { return has_dy_ || cancelled_; });
  if (cancelled_) throw StepCancelled{};
  has_dy_ = false;
  phase_ = Phase::Backward;
  torch::Tensor dy = std::move(dy_);
  lock.unlock();
  after_caller_ = runtime::RngSnapshot::capture(at::detail::getDefaultCPUGenerator());
  // Nothing of the backward has run yet: a retry can start from no
  // gradients when there are none now (the caller may zero them after the forward).
  can_retry_backward_ = true;
  for (const torch::Tensor& p : model_.parameters()) can_retry_backward_ = can_retry_backward_ && !p.grad().defined();
  if (can_retry_backward_ && dy.defined()) {
    runtime::PoolScope host(&memory_.host());
    kept_dy_ = dy.clone();
  }
  return dy;
}

void PlannedStages::wait_for(std::unique_lock<std::mutex>& lock, Phase phase) {
  changed_.wait(lock, [&] { return phase_ == phase || phase_ == Phase::Done; });
}

void PlannedStages::rethrow_failure() {
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure = failure_;
    failure_ = nullptr;
    phase_ = Phase::Idle;
  }
  if (failure) std::rethrow_exception(failure);
}

torch::Tensor PlannedStages::begin(const torch::Tensor& x) {
  if (!x.defined()) throw UsageError("the model's input is undefined; expected a tensor");
  if (x.device() != memory_.device()) {
    throw UsageError("the model's input is on " + x.device().str() + "; memtrain runs this model on " +
                     memory_.device().str());
  }
  if (options_.budget.is_percent && reference_peak_ == 0) {
    throw UsageError("a budget of " + std::to_string(options_.budget.percent) +
                     "% needs a sample input to measure the unconstrained peak on; give a sample or a budget in bytes");
  }
  cancel();  // a step begun and never finished
  {
    std::unique_lock<std::mutex> lock(mutex_);
    task_input_ = x;
    has_task_ = true;
    cancelled_ = false;
    synthetic_dy_ = false;
    phase_ = Phase::Forward;
    threads_ = at::get_num_threads();
    changed_.notify_all();
    wait_for(lock, Phase::AtBoundary);
    // The caller's autograd owns the output from here: were the worker to
    // drop the last reference, it would free the caller's graph node on its
    // own thread, inside this lock.
    if (phase_ == Phase::AtBoundary) return std::move(output_);
  }
  rethrow_failure();
  MEMTRAIN_ASSERT(false, "a step either reaches its output or fails");
  return {};
}

torch::Tensor PlannedStages::finish(const torch::Tensor& dy) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (phase_ != Phase::AtBoundary) {
      throw UsageError(
          "this output's step is no longer running (a later forward replaced it); call backward before the next "
          "forward");
    }
    dy_ = dy;
    has_dy_ = true;
    changed_.notify_all();
    wait_for(lock, Phase::Done);
  }
  rethrow_failure();
  torch::Tensor dx = std::move(dx_);
  dx_ = torch::Tensor();
  return dx;
}

void PlannedStages::cancel() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (phase_ != Phase::AtBoundary) return;
  cancelled_ = true;
  changed_.notify_all();
  wait_for(lock, Phase::Done);
  phase_ = Phase::Idle;
  failure_ = nullptr;
}

void PlannedStages::calibrate(const torch::Tensor& sample) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    MEMTRAIN_ASSERT(phase_ == Phase::Idle, "calibration runs before any step");
    task_input_ = sample;
    has_task_ = true;
    synthetic_dy_ = true;
    phase_ = Phase::Forward;
    changed_.notify_all();
    wait_for(lock, Phase::Done);
  }
  rethrow_failure();
}

void PlannedStages::note_resident(const runtime::Batch& batch) {
  memory_.synchronize();
  steps_.observe_resident(memory_.live(), batch.bytes(), batch.signature.size);
}

runtime::ExecutionResult PlannedStages::run_with_retries(const runtime::Batch& batch, std::int64_t size) {
  const runtime::RngSnapshot start = runtime::RngSnapshot::capture(at::detail::getDefaultCPUGenerator());
  const runtime::BufferSnapshot buffers = runtime::BufferSnapshot::capture(model_, memory_);
  runtime::StepAttempts attempts;
  while (true) {
    runtime::StepContext ctx;
    // Stages draw from LibTorch's default generator, which the executor
    // replays (with the context's) when it runs a stage again.
    ctx.generator = at::detail::getDefaultCPUGenerator();
    try {
      runtime::ExecutionResult result = executor_->run(choice_.schedule, batch, ctx);
      // A replayed step leaves the generators where the caller's own draws had.
      if (replay_dy_) after_caller_->restore(ctx.generator);
      return result;
    } catch (const OutOfBudget& oob) {
      bool reached_output = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reached_output = phase_ != Phase::Forward;
      }
      if (reached_output) {
        if (!can_retry_backward_ || !kept_dy_.defined()) {
          steps_.mark_failed(size, choice_);
          throw Error(std::string(oob.what()) + ", in the planned backward of input " + batch.signature.describe() +
                      ": the parameters' gradients are partial; zero them and run the step again (the next plan "
                      "for this size is stricter; with zero_grad(set_to_none=True) memtrain retries by itself)");
        }
        // The caller has seen the output and given dy: run the step again
        // with dy's copy, from no gradients, with the same random draws.
        for (torch::Tensor& p : model_.parameters()) p.mutable_grad() = torch::Tensor();
        if (batch.input.requires_grad()) batch.input.mutable_grad() = torch::Tensor();
        replay_dy_ = true;
      }
      // Nothing of the attempt reached the caller or the gradients: roll back and retry.
      buffers.restore();
      start.restore(ctx.generator);
      choice_ =
          steps_.retry(size, choice_, attempts,
                       "step " + std::to_string(current_.step) + ": input " + batch.signature.describe(), oob.what());
      current_.retries = attempts.retries;
    }
  }
}

void PlannedStages::calibrate_on(const runtime::Batch& batch) {
  // A measurement, not a step; nothing it does survives.
  memory_.set_enforced(false);
  const GradientSnapshot grads(model_.parameters());
  // Measured as a step of training is, with every gradient allocated (the
  // memory model keeps them resident), whatever the caller has now.
  for (torch::Tensor& p : model_.parameters()) {
    if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  }
  const runtime::BufferSnapshot buffers = runtime::BufferSnapshot::capture(model_, memory_);
  auto measure = [&](const Schedule& schedule) {
    runtime::StepContext ctx;
    ctx.generator = at::detail::getDefaultCPUGenerator();
    const runtime::RngSnapshot rng = runtime::RngSnapshot::capture(ctx.generator);
    runtime::ExecutionResult r = executor_->run(schedule, batch, ctx);
    buffers.restore();
    rng.restore(ctx.generator);
    return r;
  };
  const int n = model_.size();
  if (options_.budget.is_percent) {
    reference_peak_ = measure(plan::schedule_keeping_everything(n)).peak;
    budget_ = options_.budget.resolve(reference_peak_);
  }
  memory_.synchronize();
  const Bytes live = memory_.live();
  for (int round = 0; round < steps_.variant_rounds(); ++round)
    steps_.observe_sample(batch.signature.size,
                          runtime::sample_execution(measure(steps_.collection_schedule(round)), n, 0));
  steps_.observe_resident(live, batch.bytes(), batch.signature.size);
  steps_.note_size(batch.signature.size);
  if (planner().respects_budget()) {
    const Chain largest = largest_chain();
    const Plan p = steps_.planner().plan({largest, budget_, &largest});
    if (!p.feasible) {
      throw Infeasible("budget " + format_bytes(budget_) + " is below what planner " + planner().name() +
                           " needs for input " + batch.signature.describe() + ": " + format_bytes(p.min_budget_bytes),
                       p.min_budget_bytes);
    }
  }
}

void PlannedStages::run_step(const torch::Tensor& x) {
  const Clock::time_point t0 = Clock::now();
  const runtime::Batch batch = batch_of(x);
  if (synthetic_dy_) return calibrate_on(batch);
  const std::int64_t size = batch.signature.size;

  if (steps_.predictor().ready()) note_resident(batch);
  steps_.note_size(size);
  current_ = StepReport{};
  current_.step = steps_run_ + 1;
  current_.signature = batch.signature;
  current_.budget_bytes = budget_;
  steps_.use_budget(budget_);
  choice_ = steps_.choose(size, steps_run_++);
  replay_dy_ = false;
  memory_.set_budget(budget_);
  memory_.set_enforced(planner().respects_budget());
  // Enforced only while the step runs; dy's copy lives no longer than the step.
  struct StepEnd {
    PlannedStages& s;
    ~StepEnd() {
      s.memory_.set_enforced(false);
      s.kept_dy_ = torch::Tensor();
    }
  };
  runtime::ExecutionResult result;
  {
    const StepEnd end{*this};
    result = run_with_retries(batch, size);
  }
  steps_.learn(size, result, 0);
  current_.plan = choice_.kind;
  current_.schedule = choice_.schedule;
  current_.peak_bytes = result.peak;
  if (choice_.kind != runtime::PlanKind::Collect) {
    current_.predicted_peak_bytes = sim::simulate(steps_.predicted_chain(size), choice_.schedule).peak_bytes;
  }
  current_.seconds = seconds_since(t0);
  if (batch.input.requires_grad()) dx_ = batch.input.grad();
  last_ = current_;
}

}  // namespace memtrain::python
