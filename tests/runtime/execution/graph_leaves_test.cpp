#include "runtime/execution/graph_leaves.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"

namespace memtrain::runtime {
namespace {

using torch::autograd::impl::gradient_edge;

TEST(GraphLeaves, FindsTheLeavesAStageReadsBesidesItsInputAndParameters) {
  const torch::Tensor gain = torch::ones({3}, torch::requires_grad());     // its parent's
  const torch::Tensor frozen = torch::ones({3});                           // needs no gradient
  const torch::Tensor x = torch::randn({2, 3}).requires_grad_(true);       // the stage's input
  const torch::Tensor weight = torch::randn({3}, torch::requires_grad());  // its own
  const GraphStart start = GraphStart::now();
  const torch::Tensor y = (x * weight * gain * frozen).sum(1) + (gain * 2).sum();
  const std::vector<torch::Tensor> others =
      other_leaves({gradient_edge(y)}, {gradient_edge(x), gradient_edge(weight)}, start, "block 1");
  ASSERT_EQ(others.size(), 1u) << "the gain once, though read twice; not the input, the parameter or the frozen";
  EXPECT_TRUE(others[0].is_same(gain));
}

TEST(GraphLeaves, ATensorComputedBeforeTheStageRanIsRefusedByName) {
  const torch::Tensor gain = torch::ones({3}, torch::requires_grad());
  const torch::Tensor scaled = gain * 2;  // computed before the stage, read by it, not its argument
  const torch::Tensor x = torch::randn({2, 3}).requires_grad_(true);
  const GraphStart start = GraphStart::now();
  const torch::Tensor y = (x * scaled).sum();
  try {
    other_leaves({gradient_edge(y)}, {gradient_edge(x)}, start, "block 1 (Block)");
    FAIL() << "a gradient the stage cannot hand on was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("block 1 (Block)'s forward read a tensor that needs a gradient"),
              std::string::npos)
        << e.what();
  }
  // Passed as a known edge (a functional_call's parameter), it is the stage's to hand on.
  EXPECT_TRUE(other_leaves({gradient_edge(y)}, {gradient_edge(x), gradient_edge(scaled)}, start, "block 1").empty());
}

}  // namespace
}  // namespace memtrain::runtime
