#include "core/graph.h"

#include <cmath>

#include "core/error.h"

namespace memtrain {

void Graph::validate(const std::string& origin) const {
  if (nodes.empty()) throw Error(origin + ": graph has no nodes; expected at least one");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& n = nodes[i];
    const std::string where = origin + ": node " + std::to_string(i) + " ('" + n.name + "')";
    if (!(n.time >= 0) || !std::isfinite(n.time)) throw Error(where + ": time must be a finite value >= 0");
    if (n.output_bytes < 0 || n.temp_bytes < 0) throw Error(where + ": sizes must be >= 0");
    for (size_t v = 0; v < n.variants.size(); ++v) {
      const GraphNodeVariant& x = n.variants[v];
      if (!(x.time >= 0) || !std::isfinite(x.time) || x.temp_bytes < 0) {
        throw Error(where + ": variant " + std::to_string(v + 1) + " ('" + x.name +
                    "'): time must be a finite value >= 0 and temp_bytes >= 0");
      }
    }
    for (int j : n.inputs) {
      if (j < 0 || j >= static_cast<int>(i)) {
        throw Error(where + ": input " + std::to_string(j) + " is not an earlier node; expected 0.." +
                    std::to_string(static_cast<long>(i) - 1));
      }
    }
  }
  if (persistent_bytes < 0) throw Error(origin + ": persistent_bytes must be >= 0");
}

Graph with_backward(const Graph& forward, double backward_factor) {
  forward.validate("forward graph");
  const int n = forward.size();
  Graph g = forward;
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    for (int j : forward.nodes[i].inputs) consumers[j].push_back(i);
  }
  // Backward of forward node i sits at index backward_of(i) = 2n - 1 - i.
  auto backward_of = [n](int i) { return 2 * n - 1 - i; };
  for (int i = n - 1; i >= 0; --i) {
    const GraphNode& f = forward.nodes[i];
    GraphNode b;
    b.name = "grad " + f.name;
    b.time = backward_factor * f.time;
    b.temp_bytes = f.temp_bytes;
    b.inputs = f.inputs;
    b.inputs.push_back(i);
    for (int c : consumers[i]) b.inputs.push_back(backward_of(c));
    // Gradients of i's inputs; the graph's inputs (nodes reading nothing: the data) need none.
    for (int j : f.inputs) {
      if (!forward.nodes[j].inputs.empty()) b.output_bytes += forward.nodes[j].output_bytes;
    }
    g.nodes.push_back(b);
  }
  return g;
}

}  // namespace memtrain
