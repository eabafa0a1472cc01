#include "runtime/execution/input_gradient_pieces.h"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

namespace memtrain::runtime {
namespace {

using torch::autograd::impl::gradient_edge;

// A block's graph using its input three times (a residual and a norm), the
// caller's part of the input's gradient added first, as autograd adds it.
TEST(InputGradientPieces, AddedAfterTheCallersPartTheyGiveThePlainSumBitForBit) {
  torch::manual_seed(0);
  const torch::Tensor value = torch::randn({4, 64});
  const torch::Tensor callers_part = torch::randn({4, 64});
  const auto block = [](const torch::Tensor& x) { return x + torch::tanh(x * x.pow(2).mean(-1, true)) * 3.7; };
  const torch::Tensor dy = torch::randn({4, 64});

  // The plain model: one graph, the caller's part reaching the input first.
  const torch::Tensor h = value.clone().requires_grad_(true);
  const torch::Tensor input = h * 1;  // the block's input: an output of the node before
  const torch::Tensor y = block(input);
  torch::autograd::backward({input, y}, {callers_part, dy});
  const torch::Tensor plain = h.grad();

  // The block on its own: each use's piece, added after the caller's part.
  const torch::Tensor leaf = value.clone().requires_grad_(true);
  const GraphStart start = GraphStart::now();
  const torch::Tensor out = block(leaf);
  std::vector<InputUse> uses;
  const torch::autograd::Edge input_edge = gradient_edge(leaf);
  other_leaves({gradient_edge(out)}, {input_edge}, start, "block 1", input_edge.function.get(), &uses);
  ASSERT_EQ(uses.size(), 3u) << "the residual, the product and the norm";
  InputGradientPieces pieces(uses, leaf);
  torch::autograd::Engine::get_default_engine().execute({gradient_edge(out)}, {dy}, false, false, false,
                                                        pieces.sinks());
  const std::vector<torch::Tensor> made = pieces.take();
  ASSERT_EQ(made.size(), 3u);
  torch::Tensor sum = callers_part.clone();
  for (const torch::Tensor& piece : made) sum = sum + piece;
  EXPECT_TRUE(torch::equal(sum, plain)) << "the pieces in the order made, after the caller's part";
  EXPECT_FALSE(leaf.grad().defined()) << "the block's backward summed none of them into its input";

  // Summed first, as a block returning one gradient would: another order.
  const torch::Tensor whole = made[0] + made[1] + made[2];
  EXPECT_FALSE(torch::equal(callers_part + whole, plain)) << "this graph's sums do depend on the order";
}

TEST(InputGradientPieces, OutsideABackwardNoOtherNodeAddsToAnInput) {
  const torch::Tensor x = torch::randn({3}, torch::requires_grad()) * 2;
  EXPECT_FALSE(others_add_to(gradient_edge(x)));
}

}  // namespace
}  // namespace memtrain::runtime
