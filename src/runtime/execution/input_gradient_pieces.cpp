#include "runtime/execution/input_gradient_pieces.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/graph_task.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

// Where a piece goes instead of the input's accumulator: captured, never run.
struct PieceSink final : torch::autograd::Node {
  torch::autograd::variable_list apply(torch::autograd::variable_list&&) override { return {}; }
  std::string name() const override { return "memtrain::InputGradientPiece"; }
};

// Runs after a use's node made its gradients, before autograd hands them on.
struct RecordPieces final : torch::autograd::FunctionPostHook {
  RecordPieces(std::vector<std::uint32_t> edges, std::shared_ptr<std::vector<torch::Tensor>> made)
      : edges_(std::move(edges)), made_(std::move(made)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    for (std::uint32_t e : edges_) {
      if (e < outputs.size() && outputs[e].defined()) made_->push_back(outputs[e]);
    }
    return outputs;
  }
  std::vector<std::uint32_t> edges_;  // ascending: the order autograd hands them on
  std::shared_ptr<std::vector<torch::Tensor>> made_;
};

}  // namespace

InputGradientPieces::InputGradientPieces(const std::vector<InputUse>& uses, const torch::Tensor& input)
    : made_(std::make_shared<std::vector<torch::Tensor>>()) {
  std::map<torch::autograd::Node*, std::vector<std::uint32_t>> by_node;
  for (const InputUse& use : uses) {
    MEMTRAIN_ASSERT(use.node, "a use of the input is a node's edge, not a root");
    by_node[use.node].push_back(use.edge);
  }
  for (auto& [node, edges] : by_node) {
    std::sort(edges.begin(), edges.end());
    for (std::uint32_t e : edges) {
      auto sink = std::make_shared<PieceSink>();
      sink->add_input_metadata(input);
      // In place of the accumulator's edge: a leaf's place in the graph,
      // which set_next_edge() would refuse to re-rank on a node with parents.
      node->next_edges().at(e) = torch::autograd::Edge(sink, 0);
      sinks_.emplace_back(std::move(sink), 0);
    }
    node->add_post_hook(std::make_unique<RecordPieces>(edges, made_));
  }
}

std::vector<torch::Tensor> InputGradientPieces::take() { return std::move(*made_); }

bool others_add_to(const torch::autograd::Edge& edge) {
  const auto* nodes = torch::autograd::get_current_graph_task_nodes_in_graph();
  if (!nodes || !edge.is_valid()) return false;
  const auto* exec = torch::autograd::get_current_graph_task_exec_info();
  const std::shared_ptr<torch::autograd::Node> running = torch::autograd::get_current_node();
  for (torch::autograd::Node* node : *nodes) {
    if (node == running.get()) continue;
    if (exec && !exec->empty()) {
      const auto it = exec->find(node);
      if (it == exec->end() || !it->second.should_execute()) continue;
    }
    for (const auto& next : node->next_edges()) {
      if (next.function == edge.function && next.input_nr == edge.input_nr) return true;
    }
  }
  return false;
}

}  // namespace memtrain::runtime
