// A stage's input gradient in the pieces its uses of the input make, for a
// caller whose own graph adds to that gradient too (a loss on a hidden state
// between blocks). The plain model's autograd sums the caller's part first
// and then each use's piece, one at a time; a stage that returned its
// pieces' sum would add them in another order, and floating-point sums
// differ by order. Handed over one by one, autograd adds them as it does
// for the plain model, bit for bit.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "runtime/execution/graph_leaves.h"

namespace memtrain::runtime {

class InputGradientPieces {
 public:
  // Gives each use's edge into the input's accumulator a sink of its own
  // (so the stage's backward sums none of the pieces) and records each
  // piece as its node makes it: the order they reach the plain model's sum.
  InputGradientPieces(const std::vector<InputUse>& uses, const torch::Tensor& input);

  // Edges for the backward to capture: the uses' gradients are then needed.
  const torch::autograd::edge_list& sinks() const { return sinks_; }
  // The pieces in the order made (after the backward ran).
  std::vector<torch::Tensor> take();

 private:
  torch::autograd::edge_list sinks_;
  std::shared_ptr<std::vector<torch::Tensor>> made_;
};

// Whether a node of the backward now running, other than the node running
// it, adds to the gradient `edge` leads to: the caller's own graph reading
// a block's input besides the block.
bool others_add_to(const torch::autograd::Edge& edge);

}  // namespace memtrain::runtime
