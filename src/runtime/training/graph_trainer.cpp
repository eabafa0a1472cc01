#include "runtime/training/graph_trainer.h"

#include <chrono>

#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"
#include "plan/frugal_schedule.h"
#include "runtime/memory/enforcement_scope.h"
#include "runtime/step/step_attempts.h"
#include "runtime/step/step_planner.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// `graph` with its activations' bytes scaled (prediction_scale).
Graph scaled(Graph graph, double scale) {
  if (scale == 1.0) return graph;
  const auto times = [scale](Bytes b) { return static_cast<Bytes>(static_cast<double>(b) * scale); };
  for (GraphNode& n : graph.nodes) {
    n.output_bytes = times(n.output_bytes);
    n.temp_bytes = times(n.temp_bytes);
    for (GraphNodeVariant& v : n.variants) v.temp_bytes = times(v.temp_bytes);
  }
  return graph;
}

}  // namespace

GraphTrainer::GraphTrainer(GraphTrainerOptions options, DeviceMemory& memory, std::unique_ptr<GraphModel> model,
                           BatchSource& batches)
    : options_(options), memory_(memory), model_(std::move(model)), batches_(batches), budget_(options_.budget) {
  if (!(options_.prediction_scale > 0) || options_.max_retries < 0) {
    throw UsageError("graph trainer: prediction_scale must be above 0 and max_retries at least 0");
  }
  auto scope = memory_.activate();
  model_->to(memory_.device());
  adam_ = std::make_unique<Adam>(model_->parameters(), options_.adam);
  executor_ = std::make_unique<GraphExecutor>(*model_, memory_);
  // The largest input is planned first: its step keeping everything is
  // what a budget of N% is a share of (StepBudget), for every size.
  const Batch largest = batches_.largest(memory_.device());
  const Clock::time_point t0 = Clock::now();
  current_ = &plan_for(largest);
  largest_.size = largest.signature.describe();
  largest_.planning_seconds = seconds_since(t0);
}

StepContext GraphTrainer::context_for(const Batch& batch) const {
  StepContext ctx;
  ctx.targets = batch.targets;
  ctx.generator = default_generator_of(memory_.device());
  return ctx;
}

void GraphTrainer::plan_size(SizePlan& p, const std::string& size, Bytes budget) const {
  p.plan = plan::plan_graph(scaled(p.graph, options_.prediction_scale), budget, options_.time_limit);
  p.planned_for = budget;
  if (!p.plan.feasible) {
    throw Error("graph trainer: no graph schedule of " + model_->name() + " for input " + size + " fits the budget " +
                format_bytes(budget) + " (" + p.plan.note + "); keeping everything needs " +
                format_bytes(p.keep.peak_bytes) + ", of which " + format_bytes(p.graph.persistent_bytes) +
                " is resident; the budget must be larger");
  }
}

GraphTrainer::SizePlan& GraphTrainer::plan_for(const Batch& batch) {
  const std::string size = batch.signature.describe();
  auto it = plans_.find(size);
  if (it != plans_.end()) return it->second;
  SizePlan p;
  {
    // Measuring keeps everything: not a step, and not bounded by the budget.
    EnforcementScope unenforced(memory_, false);
    StepContext ctx = context_for(batch);
    p.graph = measure_training_graph(*model_, memory_, batch, ctx);
  }
  p.keep = plan::price_graph_schedule(p.graph, plan::keeping_everything(p.graph));
  if (!budget_.resolved()) budget_.set_reference(p.keep.peak_bytes);
  // A new size is planned for as much less as earlier plans fell short.
  plan_size(p, size, static_cast<Bytes>(static_cast<double>(budget_.bytes()) / shortfall_));
  p.first_planned_for = p.planned_for;
  return plans_.emplace(size, std::move(p)).first->second;
}

void GraphTrainer::make_stricter(SizePlan& p, const std::string& size, const OutOfBudget& why) {
  shortfall_ = StepPlanner::grown_shortfall(shortfall_, p.graph.persistent_bytes, p.plan.cost.peak_bytes,
                                            why.live() + why.request());
  // The ladder every front end climbs: each rung an eighth of the
  // activations' part of the first plan's budget lower.
  plan_size(p, size, plan::stricter_budget(p.first_planned_for, p.graph.persistent_bytes, ++p.strictness));
}

GraphExecution GraphTrainer::run_with_retries(SizePlan& p, const Batch& batch, StepContext& ctx, StepGuard& guard,
                                              StepRecord& rec) {
  StepAttempts attempts;
  try {
    return run_attempts([&] { return executor_->run(p.plan.schedule, batch, ctx); },
                        [&](const OutOfBudget& why) {
                          // Nothing of the attempt survives: its gradients, its random draws.
                          guard.roll_back();
                          attempts.count_failure(
                              options_.max_retries,
                              "step " + std::to_string(rec.step) + ": input " + rec.signature.describe(), why);
                          rec.retries = attempts.retries;
                          ++retries_;
                          make_stricter(p, rec.signature.describe(), why);
                          ctx = context_for(batch);
                        });
  } catch (...) {
    guard.roll_back();
    throw;
  }
}

StepRecord GraphTrainer::step() {
  auto scope = memory_.activate();
  const Batch batch = batches_.next(memory_.device());
  StepContext ctx = context_for(batch);
  StepRecord rec;
  rec.step = ++steps_;
  rec.signature = batch.signature;
  const Clock::time_point t0 = Clock::now();
  const bool new_plan = plans_.find(batch.signature.describe()) == plans_.end();
  rec.plan = new_plan ? PlanKind::New : PlanKind::Cached;
  SizePlan& p = plan_for(batch);
  current_ = &p;
  rec.planning_seconds = new_plan ? seconds_since(t0) : 0;
  const Clock::time_point t1 = Clock::now();
  StepGuard guard(memory_, budget_.bytes(), options_.enforce, ctx.generator);
  guard.rollback().discard_gradients_with([this] { adam_->zero_grad(); });
  const GraphExecution r = run_with_retries(p, batch, ctx, guard, rec);
  // Whole or not at all: only with room for the update's temporary.
  refuse_update_without_room(memory_, budget_.bytes(), adam_->update_temp_bytes(), "step " + std::to_string(rec.step));
  adam_->step();
  adam_->zero_grad();
  guard.release();
  rec.seconds = seconds_since(t1);  // the update's own device time ends within the next step's
  rec.loss = r.loss;
  rec.accuracy = ctx.counted > 0 ? ctx.correct / ctx.counted : 0;
  rec.peak_bytes = r.peak;
  rec.predicted_peak_bytes = p.plan.cost.peak_bytes;
  rec.budget_bytes = budget_.bytes();
  rec.violation = r.peak > rec.budget_bytes;
  rec.recomputed_forwards = r.recomputed;
  return rec;
}

}  // namespace memtrain::runtime
