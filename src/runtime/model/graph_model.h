// A model that is not a chain: nodes in a topological order, each reading the
// outputs of earlier nodes (a U-Net's long skip connections), the unit the
// graph planner (plan/checkmate_planner.h) decides about. Node 0 is the
// batch's input; the last node returns the scalar loss.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "core/graph.h"
#include "core/units.h"
#include "runtime/model/step_context.h"

namespace memtrain::runtime {

class GraphNodeModule : public torch::nn::Module {
 public:
  // `inputs` are the outputs of the node's input nodes, in their order.
  virtual torch::Tensor forward(const std::vector<torch::Tensor>& inputs, StepContext& ctx) = 0;

  // The node's backward from what the training graph gives it: its inputs,
  // its output and the gradient of its output. Returns one gradient per
  // input, undefined where `wanted` is false; adds the weights' gradients
  // into their grad when `accumulate_weights`. The default runs the forward
  // again with grad and back-propagates, which any module can; a node whose
  // backward needs only its inputs and output overrides it and saves that
  // forward (and the memory it holds).
  virtual std::vector<torch::Tensor> backward(const std::vector<torch::Tensor>& inputs, const torch::Tensor& output,
                                              const torch::Tensor& grad_output, const std::vector<bool>& wanted,
                                              bool accumulate_weights, StepContext& ctx);
};

class GraphModel {
 public:
  struct Node {
    std::string name;
    std::vector<int> inputs;                  // earlier nodes
    std::shared_ptr<GraphNodeModule> module;  // null for node 0, the input
  };

  // Throws Error when node 0 is not the input (no inputs, no module), when a
  // later node has no module or reads a node that is not earlier.
  GraphModel(std::string name, std::vector<Node> nodes);

  const std::string& name() const { return name_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int i) const { return nodes_.at(i); }
  // The forward graph's shape (names and inputs; no sizes or times).
  Graph structure() const;
  // Every node's forward in order from the batch's `input`, with autograd as
  // the caller has it: one plain pass through the whole network. Outputs
  // live on only where autograd saved them. Returns the last node's output,
  // the loss.
  torch::Tensor forward(const torch::Tensor& input, StepContext& ctx) const;

  std::vector<torch::Tensor> parameters() const;
  Bytes param_bytes() const;
  std::int64_t parameter_count() const;
  void to(const torch::Device& device);

 private:
  std::string name_;
  std::vector<Node> nodes_;
};

}  // namespace memtrain::runtime
