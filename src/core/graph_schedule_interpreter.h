// What a graph schedule means, written once: the graph executor runs it
// (runtime/execution/graph_executor.h) and the graph planner prices it
// (plan/checkmate_planner.h), both as backends of this interpreter, so they
// accept and refuse the same schedules with the same words.
//
// Stage t starts holding only the outputs kept into it that it still needs
// (a node of the stage reads them, or stage t + 1 keeps them). Each node the
// stage computes, in order, adds its output; after it, every output that no
// later node of the stage reads and stage t + 1 does not keep is released.
// Outputs die after their last use, as Checkmate's frees.
#pragma once

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/graph_schedule.h"

namespace memtrain {

class GraphScheduleBackend {
 public:
  virtual ~GraphScheduleBackend() = default;
  // Node k runs in stage t as `variant`; `alive[i]` marks the outputs held
  // while it runs, k's own included. `recomputed`: k ran in an earlier stage.
  virtual void compute(int t, int k, int variant, bool recomputed, const std::vector<char>& alive) = 0;
  // Output i is released.
  virtual void release(int i) = 0;
};

// "" for a schedule that can run on `graph`; otherwise what is wrong with
// it, naming the first stage and node that fail ("graph schedule: stage 2,
// node 2 ('c'): input 1 is neither kept nor computed in this stage").
std::string graph_schedule_fault(const Graph& graph, const GraphSchedule& schedule);

// Checks `schedule` (throws memtrain::Error with graph_schedule_fault's
// words), then hands the backend each computation and release in order.
void interpret_graph_schedule(const Graph& graph, const GraphSchedule& schedule, GraphScheduleBackend& backend);

}  // namespace memtrain
