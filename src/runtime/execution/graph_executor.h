// Runs a graph schedule (plan::GraphSchedule, Checkmate's R and S) of a
// GraphModel: stage t computes training-graph node t, after recomputing what
// the schedule says, and holds exactly the outputs the planner's memory model
// counts (src/plan/checkmate_planner.h): kept into the stage or computed in
// it, until their last use or the next stage that keeps them.
//
// The training graph is with_backward(model.structure()): forward nodes
// 0..n-1, then the backward of forward node i at 2n-1-i, which reads i's
// inputs, i's output and its consumers' backward nodes, and produces the
// gradients of i's inputs. A backward node hands the sum of its consumers'
// gradients (summed in node order, so every schedule computes the same bits)
// to the node's module (GraphNodeModule::backward) with i's inputs and
// output; the first time it also accumulates i's weight gradients, a
// recomputation does not.
#pragma once

#include <vector>

#include "core/graph.h"
#include "plan/checkmate_planner.h"
#include "runtime/input/batch.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/graph_model.h"
#include "runtime/model/step_context.h"

namespace memtrain::runtime {

struct GraphOpRecord {
  int stage = 0;
  int node = 0;             // training-graph node
  bool recomputed = false;  // computed before in this step
  Seconds seconds = 0;
  Bytes live_before = 0;   // device bytes before it ran
  Bytes peak = 0;          // device peak while it ran
  Bytes output_bytes = 0;  // what it produced
};

struct GraphExecution {
  double loss = 0;
  Bytes peak = 0;
  Seconds seconds = 0;
  int recomputed = 0;  // node computations beyond one per node (the free input node not counted)
  std::vector<GraphOpRecord> ops;
};

class GraphExecutor {
 public:
  GraphExecutor(GraphModel& model, DeviceMemory& memory);

  const Graph& training_structure() const { return training_; }
  // Runs one step's forward and backward through the graph schedule
  // interpreter (core/graph_schedule_interpreter.h); weight gradients
  // accumulate into the parameters' grad. Throws Error, in the interpreter's
  // words (the graph planner's pricing gives the same), for a schedule that
  // breaks a rule.
  GraphExecution run(const plan::GraphSchedule& schedule, const Batch& batch, StepContext& ctx);

 private:
  GraphModel& model_;
  DeviceMemory& memory_;
  Graph training_;
};

// The training graph of `model` as measured by one step that keeps
// everything (after a warm-up step): each node's time, output and temporary
// bytes; the resident bytes (weights, gradients, optimizer state, the batch)
// are persistent, so the input node itself costs nothing.
Graph measure_training_graph(GraphModel& model, DeviceMemory& memory, const Batch& batch, StepContext& ctx);

}  // namespace memtrain::runtime
