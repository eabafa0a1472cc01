// The cost model of a network that is not a chain (long skip connections,
// as in a U-Net): a training graph of forward and backward operations in
// one topological order, for the Checkmate/MONeT-style mixed-integer planner
// (src/plan/checkmate_planner.h).
#pragma once

#include <string>
#include <vector>

#include "core/units.h"

namespace memtrain {

// Another implementation of a node (MONeT's operator variants: a convolution
// algorithm with a smaller workspace, say): the same output, another time
// and temporary.
struct GraphNodeVariant {
  std::string name;
  Seconds time = 0;
  Bytes temp_bytes = 0;
};

struct GraphNode {
  std::string name;
  Seconds time = 0;                        // one computation of the node, s
  Bytes output_bytes = 0;                  // what it produces and may keep
  Bytes temp_bytes = 0;                    // peak above its output while it runs
  std::vector<int> inputs;                 // nodes whose outputs it reads; each earlier in the order
  std::vector<GraphNodeVariant> variants;  // variants 1..; variant 0 is the node as above

  int variant_count() const { return 1 + static_cast<int>(variants.size()); }
  Seconds time_of(int variant) const { return variant == 0 ? time : variants.at(variant - 1).time; }
  Bytes temp_of(int variant) const { return variant == 0 ? temp_bytes : variants.at(variant - 1).temp_bytes; }
};

struct Graph {
  std::vector<GraphNode> nodes;  // topological order: the order Checkmate's stages follow
  Bytes persistent_bytes = 0;    // weights and optimizer state, resident all step

  int size() const { return static_cast<int>(nodes.size()); }
  // Throws memtrain::Error naming `origin` and the node for an input that is
  // not an earlier node, a negative size or time, or an empty graph.
  void validate(const std::string& origin) const;
};

// The training graph of a forward graph whose last node is the loss: each
// forward node i gets a backward node after all forward ones, in reverse
// order, reading i's inputs, i's output and the gradients from the backward
// nodes of i's consumers; it produces the gradients of i's inputs (their
// bytes; none for the graph's inputs, the nodes that read nothing) and
// costs `backward_factor` times i's time. Variants stay with the forward
// nodes (a file that gives backward nodes variants includes them itself).
Graph with_backward(const Graph& forward, double backward_factor = 2.0);

}  // namespace memtrain
