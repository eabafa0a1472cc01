#include "python/planned_stages.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "core/chain_scaling.h"
#include "core/error.h"
#include "core/seconds_since.h"
#include "plan/frugal_schedule.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
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

// Each parameter's gradient as it was, put back when this goes (after a
// measurement). Holding the old gradients makes autograd accumulate out of
// place, so restoring them undoes the measurement exactly.
class GradientSnapshot {
 public:
  explicit GradientSnapshot(const std::vector<torch::Tensor>& params) : params_(params) {
    for (const torch::Tensor& p : params_) grads_.push_back(p.grad());
  }
  ~GradientSnapshot() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = grads_[i];
  }
  GradientSnapshot(const GradientSnapshot&) = delete;
  GradientSnapshot& operator=(const GradientSnapshot&) = delete;

 private:
  std::vector<torch::Tensor> params_, grads_;
};

runtime::Batch batch_of(const torch::Tensor& x) {
  runtime::Batch batch;
  // A leaf of its own: the planned backward stops at it, and its gradient
  // goes back to the caller's autograd rather than into the caller's graph.
  batch.input = x.detach();
  if (x.requires_grad() && x.is_floating_point()) batch.input.requires_grad_(true);
  std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (shape.empty()) shape.push_back(1);
  batch.signature = Signature::of_shape(shape);
  batch.examples = shape[0];
  return batch;
}

}  // namespace

PlannedStages::PlannedStages(runtime::StagedModel model, GradientBoundary* boundary, runtime::DeviceMemory& memory,
                             PlannedStagesOptions options)
    : model_(std::move(model)), boundary_(boundary), memory_(memory), options_(std::move(options)),
      planner_(plan::make_planner(options_.planner, options_.planner_options)),
      predictor_(runtime::stage_constants(model_, /*optimizer_slots=*/0), options_.margin),
      link_(options_.device_to_host_bandwidth, options_.host_to_device_bandwidth) {
  MEMTRAIN_ASSERT(model_.size() >= 2 && &model_.stage(model_.size() - 1) == boundary_,
                  "the gradient boundary is the last of at least two stages");
  if (options_.collect_steps < 0 || options_.collect_steps > runtime::kMaxCollectSteps) {
    throw UsageError("collection steps (collect_steps) " + std::to_string(options_.collect_steps) +
                     " is out of range; expected 0.." + std::to_string(runtime::kMaxCollectSteps));
  }
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

void PlannedStages::note_resident(Bytes live, const runtime::Batch& batch) {
  const Bytes expected = predictor_.predict(batch.signature.size).persistent_bytes() + batch.bytes();
  extra_resident_ = std::max(extra_resident_, live - expected);
}

int PlannedStages::variant_rounds() const { return runtime::collection_rounds(model_, planner_->uses_variants()); }

Schedule PlannedStages::collection_schedule(int round) const {
  return plan::schedule_for_collection(model_.size(), runtime::collection_variants(model_, round));
}

Chain PlannedStages::predicted_chain(std::int64_t size) const {
  Chain chain = predictor_.predict(size);
  chain.resident_bytes = extra_resident_;
  chain.device_to_host_bandwidth = link_.device_to_host();
  chain.host_to_device_bandwidth = link_.host_to_device();
  chain.copy_issue_time = copy_issue_.seconds();
  return chain;
}

Chain PlannedStages::largest_chain() const {
  if (!predictor_.ready()) throw Error("the model has not been measured yet; give a sample or run a step first");
  return predicted_chain(largest_size_);
}

Plan PlannedStages::plan_for(std::int64_t size) {
  Chain chain = predicted_chain(cache_->planning_size(size));
  if (options_.prediction_scale != 1.0) scale_activation_memory(chain, options_.prediction_scale);
  const Chain largest = largest_chain();
  return planner_->plan({chain, plan::stricter_budget(budget_, chain, cache_->strictness(size)), &largest});
}

Schedule PlannedStages::most_frugal(std::int64_t size) {
  const Chain largest = largest_chain();
  return plan::most_frugal_schedule(*planner_, predicted_chain(cache_->planning_size(size)), &largest,
                                    plan::schedule_for_collection(model_.size()));
}

Schedule PlannedStages::choose(std::int64_t size) {
  if (steps_ <= options_.collect_steps || !predictor_.ready()) {  // steps_: this step's number
    kind_ = runtime::PlanKind::Collect;
    // Taking the variants in turn, each is seen at several sizes.
    return collection_schedule(static_cast<int>((steps_ - 1) % variant_rounds()));
  }
  if (const Plan* hit = cache_->find(size)) {
    kind_ = runtime::PlanKind::Cached;
    return hit->schedule;
  }
  kind_ = runtime::PlanKind::New;
  Plan p = plan_for(size);
  if (!p.feasible && planner_->respects_budget()) p.schedule = most_frugal(size);
  Schedule s = p.schedule;
  cache_->store(size, std::move(p));
  return s;
}

runtime::ExecutionResult PlannedStages::run_with_retries(const runtime::Batch& batch, std::int64_t size,
                                                         Schedule& schedule) {
  const runtime::RngSnapshot start = runtime::RngSnapshot::capture(at::detail::getDefaultCPUGenerator());
  const runtime::BufferSnapshot buffers = runtime::BufferSnapshot::capture(model_, memory_);
  std::vector<Schedule> failed;
  while (true) {
    runtime::StepContext ctx;
    // Stages draw from LibTorch's default generator, which the executor
    // replays (with the context's) when it runs a stage again.
    ctx.generator = at::detail::getDefaultCPUGenerator();
    try {
      runtime::ExecutionResult result = executor_->run(schedule, batch, ctx);
      // A replayed step leaves the generators where the caller's own draws had.
      if (replay_dy_) after_caller_->restore(ctx.generator);
      return result;
    } catch (const OutOfBudget& oob) {
      bool reached_output = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reached_output = phase_ != Phase::Forward;
      }
      if (kind_ != runtime::PlanKind::Collect && cache_) cache_->mark_bad(size);
      if (reached_output) {
        if (!can_retry_backward_ || !kept_dy_.defined()) {
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
      failed.push_back(schedule);
      ++current_.retries;
      if (!cache_ || !predictor_.ready() || current_.retries > options_.max_retries) throw;
      Plan p = plan_for(size);
      Schedule next = p.feasible ? p.schedule : most_frugal(size);
      if (std::find(failed.begin(), failed.end(), next) != failed.end())
        next = plan::schedule_for_collection(model_.size());
      if (std::find(failed.begin(), failed.end(), next) != failed.end()) {
        throw Error("input " + batch.signature.describe() +
                    " does not fit the budget even with the most frugal schedule: " + oob.what());
      }
      schedule = std::move(next);
      kind_ = runtime::PlanKind::Retry;
    }
  }
}

void PlannedStages::run_step(const torch::Tensor& x) {
  const Clock::time_point t0 = Clock::now();
  const runtime::Batch batch = batch_of(x);
  const std::int64_t size = batch.signature.size;
  const int n = model_.size();

  if (synthetic_dy_) {
    // Calibration: a measurement, not a step; nothing it does survives.
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
    if (options_.budget.is_percent) {
      reference_peak_ = measure(plan::schedule_keeping_everything(n)).peak;
      budget_ = options_.budget.resolve(reference_peak_);
    }
    memory_.synchronize();
    const Bytes live = memory_.live();
    for (int round = 0; round < variant_rounds(); ++round) {
      predictor_.observe(size, runtime::sample_execution(measure(collection_schedule(round)), n, 0));
    }
    note_resident(live, batch);
    largest_size_ = std::max(largest_size_, size);
    if (planner_->respects_budget()) {
      const Chain largest = largest_chain();
      const Plan p = planner_->plan({largest, budget_, &largest});
      if (!p.feasible) {
        throw Infeasible("budget " + format_bytes(budget_) + " is below what planner " + planner_->name() +
                             " needs for input " + batch.signature.describe() + ": " + format_bytes(p.min_budget_bytes),
                         p.min_budget_bytes);
      }
    }
    return;
  }

  memory_.synchronize();
  if (predictor_.ready()) note_resident(memory_.live(), batch);
  largest_size_ = std::max(largest_size_, size);

  current_ = StepReport{};
  current_.step = ++steps_;
  current_.signature = batch.signature;
  current_.budget_bytes = budget_;
  if (!cache_ && predictor_.ready()) {
    // Buckets of 1/64 of the largest size seen when the predictor first could plan.
    const std::int64_t width = options_.bucket > 0 ? options_.bucket : std::max<std::int64_t>(1, largest_size_ / 64);
    cache_ = std::make_unique<predict::PlanCache>(width);
  }
  Schedule schedule = choose(size);
  replay_dy_ = false;
  memory_.set_budget(budget_);
  memory_.set_enforced(planner_->respects_budget());
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
    result = run_with_retries(batch, size, schedule);
  }
  predictor_.observe(size, runtime::sample_execution(result, n, 0));
  const CopyStats& c = result.copies;
  link_.observe(c.to_host_bytes, c.to_host_seconds, c.to_device_bytes, c.to_device_seconds);
  copy_issue_.observe(runtime::copy_issue_seconds(result));
  current_.plan = kind_;
  current_.schedule = schedule;
  current_.peak_bytes = result.peak;
  if (kind_ != runtime::PlanKind::Collect) {
    current_.predicted_peak_bytes = sim::simulate(predicted_chain(size), schedule).peak_bytes;
  }
  current_.seconds = seconds_since(t0);
  if (batch.input.requires_grad()) dx_ = batch.input.grad();
  last_ = current_;
}

}  // namespace memtrain::python
