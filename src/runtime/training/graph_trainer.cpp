#include "runtime/training/graph_trainer.h"

#include <chrono>

#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"

namespace memtrain::runtime {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

GraphTrainer::GraphTrainer(GraphTrainerOptions options, DeviceMemory& memory, std::unique_ptr<GraphModel> model,
                           BatchSource& batches)
    : options_(options), memory_(memory), model_(std::move(model)), batches_(batches), budget_(options_.budget) {
  auto scope = memory_.activate();
  model_->to(memory_.device());
  adam_ = std::make_unique<Adam>(model_->parameters(), options_.adam);
  executor_ = std::make_unique<GraphExecutor>(*model_, memory_);
  // The largest input is planned first: its step keeping everything is
  // what a budget of N% is a share of (StepBudget), for every size.
  const Batch largest = batches_.largest(memory_.device());
  StepContext ctx;
  ctx.targets = largest.targets;
  const Clock::time_point t0 = Clock::now();
  current_ = &plan_for(largest, ctx);
  largest_.size = largest.signature.describe();
  largest_.planning_seconds = seconds_since(t0);
}

const GraphTrainer::SizePlan& GraphTrainer::plan_for(const Batch& batch, StepContext& ctx) {
  const std::string size = batch.signature.describe();
  auto it = plans_.find(size);
  if (it != plans_.end()) return it->second;
  SizePlan p;
  p.graph = measure_training_graph(*model_, memory_, batch, ctx);
  p.keep = plan::price_graph_schedule(p.graph, plan::keeping_everything(p.graph));
  if (!budget_.resolved()) budget_.set_reference(p.keep.peak_bytes);
  p.plan = plan::plan_graph(p.graph, budget_.bytes(), options_.time_limit);
  if (!p.plan.feasible) {
    throw Error("graph trainer: no graph schedule of " + model_->name() + " for input " + size + " fits the budget " +
                format_bytes(budget_.bytes()) + " (" + p.plan.note + "); keeping everything needs " +
                format_bytes(p.keep.peak_bytes) + ", of which " + format_bytes(p.graph.persistent_bytes) +
                " is resident; the budget must be larger");
  }
  return plans_.emplace(size, std::move(p)).first->second;
}

GraphStepRecord GraphTrainer::step() {
  auto scope = memory_.activate();
  const Batch batch = batches_.next(memory_.device());
  StepContext ctx;
  ctx.targets = batch.targets;
  GraphStepRecord rec;
  rec.step = ++steps_;
  rec.size = batch.signature.describe();
  const Clock::time_point t0 = Clock::now();
  rec.new_plan = plans_.find(rec.size) == plans_.end();
  current_ = &plan_for(batch, ctx);
  rec.planning_seconds = rec.new_plan ? seconds_since(t0) : 0;
  const Clock::time_point t1 = Clock::now();
  const GraphExecution r = executor_->run(current_->plan.schedule, batch, ctx);
  adam_->step();
  adam_->zero_grad();
  rec.seconds = seconds_since(t1);  // the update's own device time ends within the next step's
  rec.loss = r.loss;
  rec.accuracy = ctx.counted > 0 ? ctx.correct / ctx.counted : 0;
  rec.peak_bytes = r.peak;
  rec.planned_peak_bytes = current_->plan.cost.peak_bytes;
  rec.budget_bytes = budget_.bytes();
  rec.violation = r.peak > rec.budget_bytes;
  rec.recomputed = r.recomputed;
  return rec;
}

}  // namespace memtrain::runtime
