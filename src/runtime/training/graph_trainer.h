// Training a GraphModel (the U-Net) under a budget with the graph planner:
// for each input size it measures the training graph (one warm-up and one
// measured step that keep everything), solves Checkmate's program with CBC
// for the budget, and runs that schedule every step of that size (the
// largest input first, on construction: a budget of N% is a share of its
// step keeping everything); Adam updates the weights after each step.
//
// A step runs as every trainer's does (runtime/step): under its StepGuard
// the allocator enforces the budget, and an attempt that runs out
// (run_attempts) is rolled back (its gradients dropped, the random
// generators rewound) and run again under a stricter plan for its size, a
// rung lower on the chains' ladder (plan::stricter_budget: an eighth of the
// activations' part of its first plan's budget per rung), which the size keeps. The update runs only
// with room for its temporary, so none is half applied. The graph planner
// predicts nothing per size: each new size is measured before it is
// planned, and new sizes are planned for as much less as the plans so far
// fell short.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/units.h"
#include "plan/checkmate_planner.h"
#include "runtime/execution/graph_executor.h"
#include "runtime/input/batch_source.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/adam.h"
#include "runtime/model/graph_model.h"
#include "runtime/step/step_budget.h"
#include "runtime/step/step_guard.h"
#include "runtime/step/step_record.h"

namespace memtrain::runtime {

struct GraphTrainerOptions {
  BudgetSpec budget = {true, 90.0, 0};  // N%: of the largest input's step keeping everything (StepBudget)
  AdamOptions adam;
  double time_limit = 60;  // seconds CBC may search per input size
  bool enforce = true;     // the allocator refuses what would pass the budget; steps retry
  int max_retries = 8;     // stricter plans for one step before giving up
  // Fault injection for tests: the graph the planner sees has its memory
  // multiplied by this, so < 1 makes plans that run out of budget.
  double prediction_scale = 1.0;
};

class GraphTrainer {
 public:
  // Builds Adam over `model`'s weights in `memory`; throws UsageError when
  // the budget cannot be met (with the least found and the keep-everything peak).
  GraphTrainer(GraphTrainerOptions options, DeviceMemory& memory, std::unique_ptr<GraphModel> model,
               BatchSource& batches);
  StepRecord step();

  const GraphModel& model() const { return *model_; }
  // Of the last size planned.
  const Graph& graph() const { return current_->graph; }
  const plan::GraphPlan& plan() const { return current_->plan; }
  Bytes budget_bytes() const { return budget_.bytes(); }
  long retries() const { return retries_; }  // all steps' attempts that ran out of budget
  bool enforced() const { return options_.enforce; }
  // Keeping everything, priced on the same graph (of the last size planned): the time to compare.
  const plan::GraphCost& keep_everything() const { return current_->keep; }
  // What a budget of N% is a share of: the largest input's step keeping everything.
  Bytes reference_peak_bytes() const { return budget_.reference(); }
  // The largest input, planned on construction (the plan of the last size
  // planned until the first step).
  struct PlannedSize {
    std::string size;
    Seconds planning_seconds = 0;
  };
  const PlannedSize& largest() const { return largest_; }

 private:
  struct SizePlan {
    Graph graph;
    plan::GraphPlan plan;
    plan::GraphCost keep;
    Bytes planned_for = 0;        // the budget the plan was made for
    Bytes first_planned_for = 0;  // the budget its first plan was made for
    int strictness = 0;           // the plans that ran out of budget
  };
  StepContext context_for(const Batch& batch) const;
  SizePlan& plan_for(const Batch& batch);
  // Plans `p` for `budget`; throws Error naming the size when nothing fits.
  void plan_size(SizePlan& p, const std::string& size, Bytes budget) const;
  // `p` ran out of budget (`why`): planned again a rung lower on the step
  // planner's ladder (plan::stricter_budget), and the planner's shortfall
  // learnt for the sizes still to come.
  void make_stricter(SizePlan& p, const std::string& size, const OutOfBudget& why);
  GraphExecution run_with_retries(SizePlan& p, const Batch& batch, StepContext& ctx, StepGuard& guard, StepRecord& rec);

  GraphTrainerOptions options_;
  DeviceMemory& memory_;
  std::unique_ptr<GraphModel> model_;
  BatchSource& batches_;
  StepBudget budget_;
  PlannedSize largest_;
  std::unique_ptr<Adam> adam_;
  std::unique_ptr<GraphExecutor> executor_;  // its training graph is derived once, not every step
  std::map<std::string, SizePlan> plans_;
  const SizePlan* current_ = nullptr;
  long steps_ = 0;
  long retries_ = 0;
  double shortfall_ = 1.0;  // how much more than planned the plans reached, at most; >= 1
};

}  // namespace memtrain::runtime
