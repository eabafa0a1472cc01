#include "runtime/model/graph_model.h"

#include <torch/autograd.h>

#include "core/error.h"

namespace memtrain::runtime {

std::vector<torch::Tensor> GraphNodeModule::backward(const std::vector<torch::Tensor>& inputs, const torch::Tensor&,
                                                     const torch::Tensor& grad_output, const std::vector<bool>& wanted,
                                                     bool accumulate_weights, StepContext& ctx) {
  torch::AutoGradMode grad_on(true);
  std::vector<torch::Tensor> leaves, wanted_leaves;
  for (size_t p = 0; p < inputs.size(); ++p) {
    torch::Tensor leaf = inputs[p].detach();
    if (wanted.at(p)) {
      leaf.requires_grad_(true);
      wanted_leaves.push_back(leaf);
    }
    leaves.push_back(leaf);
  }
  const torch::Tensor y = forward(leaves, ctx);
  std::vector<torch::Tensor> input_grads;
  if (accumulate_weights) {
    torch::autograd::backward({y}, {grad_output});
    for (const torch::Tensor& leaf : wanted_leaves) input_grads.push_back(leaf.grad());
  } else if (!wanted_leaves.empty()) {
    input_grads = torch::autograd::grad({y}, wanted_leaves, {grad_output});
  }
  std::vector<torch::Tensor> grads(inputs.size());
  for (size_t p = 0, w = 0; p < inputs.size(); ++p) {
    if (wanted[p]) grads[p] = input_grads[w++];
  }
  return grads;
}

GraphModel::GraphModel(std::string name, std::vector<Node> nodes) : name_(std::move(name)), nodes_(std::move(nodes)) {
  if (nodes_.size() < 2) throw Error("graph model '" + name_ + "': expected the input node and at least one more");
  if (!nodes_[0].inputs.empty() || nodes_[0].module) {
    throw Error("graph model '" + name_ + "': node 0 must be the input (no inputs, no module)");
  }
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const std::string where = "graph model '" + name_ + "', node " + std::to_string(i) + " ('" + nodes_[i].name + "')";
    if (!nodes_[i].module) throw Error(where + ": has no module");
    if (nodes_[i].inputs.empty()) throw Error(where + ": reads nothing; only node 0 is an input");
    for (int j : nodes_[i].inputs) {
      if (j < 0 || j >= static_cast<int>(i))
        throw Error(where + ": input " + std::to_string(j) + " is not an earlier node");
    }
  }
}

Graph GraphModel::structure() const {
  Graph g;
  for (const Node& n : nodes_) {
    GraphNode node;
    node.name = n.name;
    node.inputs = n.inputs;
    g.nodes.push_back(node);
  }
  return g;
}

torch::Tensor GraphModel::forward(const torch::Tensor& input, StepContext& ctx) const {
  std::vector<torch::Tensor> value(nodes_.size());
  value[0] = input;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    std::vector<torch::Tensor> inputs;
    for (int j : nodes_[i].inputs) inputs.push_back(value[j]);
    value[i] = nodes_[i].module->forward(inputs, ctx);
  }
  return value.back();
}

std::vector<torch::Tensor> GraphModel::parameters() const {
  std::vector<torch::Tensor> all;
  for (const Node& n : nodes_) {
    if (!n.module) continue;
    for (const torch::Tensor& p : n.module->parameters()) all.push_back(p);
  }
  return all;
}

Bytes GraphModel::param_bytes() const {
  Bytes b = 0;
  for (const torch::Tensor& p : parameters()) b += static_cast<Bytes>(p.nbytes());
  return b;
}

std::int64_t GraphModel::parameter_count() const {
  std::int64_t count = 0;
  for (const torch::Tensor& p : parameters()) count += p.numel();
  return count;
}

void GraphModel::to(const torch::Device& device) {
  for (Node& n : nodes_) {
    if (n.module) n.module->to(device);
  }
}

}  // namespace memtrain::runtime
