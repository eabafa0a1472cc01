// What a stage's backward graph reaches besides its input: a block may read
// parameters that are not its own (a gain its parent owns) or that were
// added after the model was wrapped (an adapter), and every one of them is
// owed its gradient, as on the plain model.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::runtime {

// Where a stage's forward with grad began: the nodes it made carry the
// thread's sequence numbers from here on.
struct GraphStart {
  std::uint64_t thread = 0;
  std::uint64_t sequence = 0;
  static GraphStart now();
};

// The leaves needing a gradient that the graph from `roots` reaches, other
// than those behind `known` (gradient edges taken already: the stage's
// input and parameters). A node made before `start` is outside the stage:
// its forward read a tensor computed before it ran that needs a gradient
// and was not its argument, and the stage's backward cannot hand that
// gradient on; throws UsageError naming `stage`.
// With `input` (the stage's input's accumulator), `input_uses` gets the
// graph's edges into it.
struct InputUse {
  torch::autograd::Node* node;  // null where a root is the input itself
  std::uint32_t edge;
};
std::vector<torch::Tensor> other_leaves(const torch::autograd::edge_list& roots,
                                        const torch::autograd::edge_list& known, const GraphStart& start,
                                        const std::string& stage, const torch::autograd::Node* input = nullptr,
                                        std::vector<InputUse>* input_uses = nullptr);

}  // namespace memtrain::runtime
