#include "core/graph_schedule_interpreter.h"

#include <algorithm>

#include "core/error.h"

namespace memtrain {

namespace {

bool reads(const Graph& graph, int k, int i) {
  const auto& in = graph.nodes[k].inputs;
  return std::find(in.begin(), in.end(), i) != in.end();
}

// Output i is still needed in stage t after node `after` (-1: before any):
// a later node of the stage reads it, or stage t + 1 keeps it.
bool needed_after(const Graph& graph, const GraphSchedule& s, int t, int after, int i) {
  const int n = graph.size();
  if (t + 1 < n && i <= t && s.keep[t + 1][i]) return true;
  for (int j = after + 1; j <= t; ++j) {
    if (s.compute[t][j] && reads(graph, j, i)) return true;
  }
  return false;
}

}  // namespace

std::string graph_schedule_fault(const Graph& graph, const GraphSchedule& s) {
  const int n = graph.size();
  const std::string origin = "graph schedule: ";
  auto at = [&](int t, int i, const std::string& why) {
    return origin + "stage " + std::to_string(t) + ", node " + std::to_string(i) + " ('" + graph.nodes[i].name +
           "'): " + why;
  };
  if (static_cast<int>(s.compute.size()) != n || static_cast<int>(s.keep.size()) != n) {
    return origin + std::to_string(s.compute.size()) + " stages; the graph has " + std::to_string(n) +
           " nodes, one stage each";
  }
  if (!s.variant.empty() && static_cast<int>(s.variant.size()) != n) {
    return origin + "variants for " + std::to_string(s.variant.size()) + " nodes; the graph has " + std::to_string(n);
  }
  for (int i = 0; i < n; ++i) {
    const int v = s.variant_of(i);
    if (v < 0 || v >= graph.nodes[i].variant_count()) {
      return at(0, i,
                "variant " + std::to_string(v) + " does not exist; the node has variants 0.." +
                    std::to_string(graph.nodes[i].variant_count() - 1));
    }
  }
  for (int t = 0; t < n; ++t) {
    if (static_cast<int>(s.compute[t].size()) != n || static_cast<int>(s.keep[t].size()) != n) {
      return origin + "stage " + std::to_string(t) + " does not name every node (" + std::to_string(n) + ")";
    }
    if (!s.compute[t][t]) return at(t, t, "stage t must compute node t");
    for (int i = 0; i < t; ++i) {
      if (!s.keep[t][i]) continue;
      const bool had = (i < t - 1 && s.keep[t - 1][i]) || s.compute[t - 1][i];
      if (!had) return at(t, i, "kept but neither kept nor computed in the stage before");
    }
    for (int k = 0; k <= t; ++k) {
      if (!s.compute[t][k]) continue;
      for (int j : graph.nodes[k].inputs) {
        const bool held = (j < t && s.keep[t][j]) || (j < k && s.compute[t][j]);
        if (!held) return at(t, k, "input " + std::to_string(j) + " is neither kept nor computed in this stage");
      }
    }
  }
  return "";
}

void interpret_graph_schedule(const Graph& graph, const GraphSchedule& s, GraphScheduleBackend& backend) {
  const std::string fault = graph_schedule_fault(graph, s);
  if (!fault.empty()) throw Error(fault);
  const int n = graph.size();
  std::vector<char> alive(n, 0), ran(n, 0);
  auto release = [&](int i) {
    alive[i] = 0;
    backend.release(i);
  };
  for (int t = 0; t < n; ++t) {
    // Entering the stage: only what it keeps and still needs.
    for (int i = 0; i < n; ++i) {
      if (alive[i] && !(i < t && s.keep[t][i] && needed_after(graph, s, t, -1, i))) release(i);
    }
    for (int k = 0; k <= t; ++k) {
      if (!s.compute[t][k]) continue;
      alive[k] = 1;
      backend.compute(t, k, s.variant_of(k), ran[k], alive);
      ran[k] = 1;
      for (int i = 0; i <= t; ++i) {
        if (alive[i] && !needed_after(graph, s, t, k, i)) release(i);
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (alive[i]) release(i);
  }
}

}  // namespace memtrain
