#include "runtime/execution/graph_leaves.h"

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <unordered_set>

#include "core/error.h"

namespace memtrain::runtime {

GraphStart GraphStart::now() { return {at::RecordFunction::currentThreadId(), at::sequence_number::peek()}; }

std::vector<torch::Tensor> other_leaves(const torch::autograd::edge_list& roots,
                                        const torch::autograd::edge_list& known, const GraphStart& start,
                                        const std::string& stage, const torch::autograd::Node* input,
                                        std::vector<InputUse>* input_uses) {
  using torch::autograd::Node;
  std::unordered_set<const Node*> stops;
  for (const auto& edge : known) stops.insert(edge.function.get());
  std::vector<torch::Tensor> leaves;
  std::unordered_set<const Node*> seen;
  std::vector<Node*> todo;
  for (const auto& root : roots) {
    if (root.is_valid()) todo.push_back(root.function.get());
    if (input_uses && root.function.get() == input) input_uses->push_back({nullptr, 0});
  }
  while (!todo.empty()) {
    Node* node = todo.back();
    todo.pop_back();
    if (!seen.insert(node).second || stops.count(node)) continue;
    if (auto* accumulate = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      leaves.push_back(accumulate->variable);
      continue;
    }
    if (node->thread_id() != start.thread || node->sequence_nr() < start.sequence) {
      throw UsageError(stage + "'s forward read a tensor that needs a gradient (through " + node->name() +
                       ") computed before the block ran, neither its argument nor a parameter; memtrain runs a "
                       "block's backward on its own and cannot hand that gradient on: pass the tensor to the "
                       "block as its input, or compute it inside the block");
    }
    const auto& edges = node->next_edges();
    for (std::uint32_t e = 0; e < edges.size(); ++e) {
      if (!edges[e].is_valid()) continue;
      todo.push_back(edges[e].function.get());
      if (input_uses && edges[e].function.get() == input) input_uses->push_back({node, e});
    }
  }
  return leaves;
}

}  // namespace memtrain::runtime
