// Checkpointing for graphs that are not chains (Checkmate, Jain et al.; the
// formulation MONeT extends), as a mixed-integer program solved with COIN-OR
// CBC, choosing each node's variant (GraphNode::variants: its time and
// temporary) together with the schedule, as MONeT does. Stage t computes node t of the training graph and may recompute
// earlier nodes first; R[t][i] = 1 when stage t computes node i, S[t][i] = 1
// when node i's output is kept entering stage t.
//
// Memory in stage t while it computes node k: the resident bytes, k's
// output and temporary, and every output alive then: kept into the stage or
// computed earlier in it, and still needed (by k, by a node the stage
// computes later, or kept for the next stage). Outputs die after their last
// use, as Checkmate's frees. Minimise the total compute time subject to
//   R[t][t] = 1;  R[t][i] <= R[t][j] + S[t][j] for every input j of i;
//   S[t+1][i] <= S[t][i] + R[t][i];  memory(t, k) <= budget,
// where memory uses A[t][i][k] ("i alive while k runs"), bounded below by
// each reason i must be alive, linearly. A node with variants gets Y[i][v]
// (one of them, sum 1) and Z[t][i][v] >= R[t][i] + Y[i][v] - 1, which carry
// its time in the objective and its temporary in memory(t, i).
#pragma once

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/graph_schedule.h"

namespace memtrain::plan {

using memtrain::GraphSchedule;

struct GraphCost {
  bool valid = false;
  std::string why;  // when not valid: the first stage and node that fail
  Seconds time = 0;
  Bytes peak_bytes = 0;
};

// Prices a graph schedule under the model above (through
// core/graph_schedule_interpreter.h); invalid, with the interpreter's words,
// for a schedule that breaks a rule.
GraphCost price_graph_schedule(const Graph& graph, const GraphSchedule& schedule);

// The least `keep` for a given `compute`: each output kept from its last
// computation until its last use from storage. Memory only falls.
GraphSchedule with_least_keeping(const Graph& graph, std::vector<std::vector<char>> compute);

// Each stage computes only its own node; outputs kept until their last use.
GraphSchedule keeping_everything(const Graph& graph);

struct GraphPlan {
  bool feasible = false;
  bool proven_optimal = false;  // false when the time limit stopped the search first
  GraphSchedule schedule;
  GraphCost cost;
  std::string note;
};

// Solves the program with CBC within `time_limit` seconds; when the limit
// hits, the best schedule found so far (feasible, not proven optimal).
GraphPlan plan_graph(const Graph& graph, Bytes budget, double time_limit = 60);

// Every choice of `compute` and of variants for graphs of up to 7 nodes, for validation.
GraphPlan plan_graph_exhaustively(const Graph& graph, Bytes budget);

}  // namespace memtrain::plan
