// Training a GraphModel (the U-Net) under a budget with the graph planner:
// for each input size it measures the training graph (one warm-up and one
// measured step that keep everything), solves Checkmate's program with CBC
// for the budget, and runs that schedule every step of that size (the
// largest input first, on construction: a budget of N% is a share of its
// step keeping everything); Adam
// updates the weights after each step. The budget is not enforced by the
// allocator here: a step whose measured peak exceeds it is counted as a
// violation.
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
#include "runtime/training/step_budget.h"

namespace memtrain::runtime {

struct GraphTrainerOptions {
  BudgetSpec budget = {true, 90.0, 0};  // N%: of the largest input's step keeping everything (StepBudget)
  AdamOptions adam;
  double time_limit = 60;  // seconds CBC may search per input size
};

struct GraphStepRecord {
  long step = 0;
  std::string size;       // the input's shape
  bool new_plan = false;  // measured and planned for this step's size
  double loss = 0;
  double accuracy = 0;
  Bytes peak_bytes = 0;          // measured
  Bytes planned_peak_bytes = 0;  // priced on the measured graph
  Bytes budget_bytes = 0;
  bool violation = false;
  int recomputed = 0;            // node computations beyond one per node
  Seconds seconds = 0;           // the step, update included (planning excluded)
  Seconds planning_seconds = 0;  // measuring and solving, on a new size
};

class GraphTrainer {
 public:
  // Builds Adam over `model`'s weights in `memory`; throws UsageError when
  // the budget cannot be met (with the least found and the keep-everything peak).
  GraphTrainer(GraphTrainerOptions options, DeviceMemory& memory, std::unique_ptr<GraphModel> model,
               BatchSource& batches);
  GraphStepRecord step();

  const GraphModel& model() const { return *model_; }
  // Of the last size planned.
  const Graph& graph() const { return current_->graph; }
  const plan::GraphPlan& plan() const { return current_->plan; }
  Bytes budget_bytes() const { return budget_.bytes(); }
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
  };
  const SizePlan& plan_for(const Batch& batch, StepContext& ctx);

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
};

}  // namespace memtrain::runtime
