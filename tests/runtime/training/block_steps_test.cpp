// BlockSteps driven as a front end drives it: the caller calls each block's
// forward, runs its own head and loss with autograd, and hands each block's
// output gradient back, last block first. Under a budget that makes the
// planner recompute, on inputs whose length changes every step, the blocks'
// gradients and the input's are the plain model's, bit for bit (dropout
// included), and a budget below the least schedule is refused before a
// block runs.
#include "runtime/training/block_steps.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/memory/device_memory.h"
#include "runtime/model/rng_snapshot.h"
#include "runtime/training/gradient_boundary.h"

namespace memtrain::runtime {
namespace {

constexpr std::int64_t kWidth = 32;
constexpr int kBlocks = 4;

// A residual block whose activations dwarf its weights, with dropout.
struct Block : StageModule {
  torch::nn::Linear up{nullptr}, down{nullptr};
  Block() {
    up = register_module("up", torch::nn::Linear(kWidth, 4 * kWidth));
    down = register_module("down", torch::nn::Linear(4 * kWidth, kWidth));
  }
  torch::Tensor forward(const torch::Tensor& x, StepContext&) override {
    return x + down(torch::dropout(torch::gelu(up(x)), 0.1, /*train=*/true));
  }
};

// The blocks, a head the caller runs itself, and the blocks' steps.
struct Blocks {
  CpuDeviceMemory memory;
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::Linear head{nullptr};
  std::unique_ptr<BlockSteps> steps;

  explicit Blocks(const BudgetSpec& budget, const std::string& planner = "mimose") {
    auto counted = memory.activate();
    torch::manual_seed(5);
    std::vector<std::shared_ptr<StageModule>> modules;
    std::vector<std::string> names;
    for (int i = 0; i < kBlocks; ++i) {
      blocks.push_back(std::make_shared<Block>());
      modules.push_back(blocks.back());
      names.push_back("block " + std::to_string(i));
    }
    head = torch::nn::Linear(kWidth, 500);
    auto boundary = std::make_shared<GradientBoundary>();
    modules.push_back(boundary);
    names.push_back("after the blocks");
    BlockStepsOptions options;
    options.steps.planner = planner;
    options.steps.collect_steps = 2;
    options.budget = budget;
    steps = std::make_unique<BlockSteps>(StagedModel("blocks", names, modules), boundary.get(), memory, options,
                                         head->parameters());
  }

  // The caller's loss on the last block's output.
  torch::Tensor loss_of(const torch::Tensor& y, const torch::Tensor& targets) {
    return torch::cross_entropy_loss(head(y).flatten(0, 1), targets.flatten());
  }

  // One step as the front end runs it: the blocks' gradients (block by
  // block, in parameters() order), then the input's.
  std::vector<torch::Tensor> memtrain_step(const torch::Tensor& x, const torch::Tensor& targets) {
    auto counted = memory.activate();
    torch::Tensor h = x;
    for (int i = 0; i < kBlocks; ++i) h = steps->forward(i, h);
    torch::Tensor y = h.detach().requires_grad_(true);
    loss_of(y, targets).backward();
    torch::Tensor dy = y.grad();
    const long step = steps->step();
    std::vector<std::vector<torch::Tensor>> per_block(kBlocks);
    for (int i = kBlocks - 1; i >= 0; --i) {
      dy = steps->backward(step, i, dy);
      per_block[i] = steps->block_gradients().gradients;
    }
    steps->end_of_backward();
    std::vector<torch::Tensor> gradients;
    for (auto& g : per_block) gradients.insert(gradients.end(), g.begin(), g.end());
    gradients.push_back(dy);
    return gradients;
  }

  // The same step on the plain blocks, with autograd alone.
  std::vector<torch::Tensor> plain_step(const torch::Tensor& x, const torch::Tensor& targets) {
    auto counted = memory.activate();
    torch::Tensor input = x.detach().requires_grad_(true);
    torch::Tensor h = input;
    StepContext ctx;
    for (auto& block : blocks) h = block->forward(h, ctx);
    std::vector<torch::Tensor> params;
    for (auto& block : blocks) {
      for (auto& p : block->parameters()) params.push_back(p);
    }
    params.push_back(input);
    return torch::autograd::grad({loss_of(h, targets)}, params);
  }

  // Calibration on the largest input, as the Python module runs it.
  void calibrate(const torch::Tensor& sample, const torch::Tensor& targets) {
    const int rounds = steps->begin_calibration();
    for (int r = 0; r < rounds; ++r) {
      steps->calibration_round(r);
      memtrain_step(sample, targets);
    }
    steps->end_calibration();
  }
};

torch::Tensor input_of(std::int64_t length) { return torch::randn({4, length, kWidth}).requires_grad_(true); }
torch::Tensor targets_of(std::int64_t length) { return torch::randint(500, {4, length}); }

TEST(BlockSteps, StepsUnderABudgetGiveThePlainModelsGradientsBitForBit) {
  Blocks m({true, 70, 0});
  torch::manual_seed(11);
  m.calibrate(input_of(64), targets_of(64));
  Bytes last_peak = 0;
  int recomputing = 0;
  for (std::int64_t length : {64, 24, 48, 16, 64, 40, 24, 56}) {
    const torch::Tensor x = input_of(length), t = targets_of(length);
    torch::manual_seed(100 + length);
    const std::vector<torch::Tensor> planned = m.memtrain_step(x, t);
    torch::manual_seed(100 + length);
    const std::vector<torch::Tensor> plain = m.plain_step(x, t);
    ASSERT_EQ(planned.size(), plain.size());
    for (size_t k = 0; k < plain.size(); ++k) {
      ASSERT_TRUE(planned[k].defined()) << "length " << length << " gradient " << k;
      EXPECT_TRUE(torch::equal(planned[k], plain[k])) << "length " << length << " gradient " << k;
    }
    const StepRecord& r = m.steps->last_step();
    EXPECT_EQ(r.retries, 0) << "length " << length;
    EXPECT_LE(r.peak_bytes, r.budget_bytes) << "length " << length;
    if (r.schedule.recomputed_forwards(kBlocks + 1) > 0) ++recomputing;
    last_peak = r.peak_bytes;
  }
  EXPECT_GT(last_peak, 0);
  // 70% of the sample's peak cannot keep everything at the longest lengths.
  EXPECT_GT(recomputing, 0);
}

TEST(BlockSteps, ABudgetBelowTheLeastScheduleIsRefusedBeforeABlockRuns) {
  Blocks m({false, 0, 4096});
  torch::manual_seed(11);
  try {
    m.calibrate(input_of(64), targets_of(64));
    FAIL() << "a 4 KiB budget was accepted";
  } catch (const Infeasible& e) {
    EXPECT_GT(e.min_bytes(), 4096);
    EXPECT_NE(std::string(e.what()).find("that planner mimose needs for input"), std::string::npos) << e.what();
  }
  // The refused calibration leaves the blocks' gradients as they were.
  for (auto& block : m.blocks) {
    for (auto& p : block->parameters()) EXPECT_FALSE(p.grad().defined());
  }
}

TEST(BlockSteps, AStepThatCannotFitIsRefusedBeforeItDrawsARandomNumber) {
  Blocks m({false, 0, Bytes(1) << 30});
  torch::manual_seed(11);
  m.calibrate(input_of(64), targets_of(64));
  m.steps->set_budget({false, 0, 64 << 10});
  const torch::Tensor x = input_of(64);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const torch::Tensor state = generator.get_state();
  auto counted = m.memory.activate();
  try {
    m.steps->forward(0, x);
    FAIL() << "a 64 KiB budget ran a step";
  } catch (const Infeasible& e) {
    EXPECT_GT(e.min_bytes(), 64 << 10);
  }
  EXPECT_TRUE(torch::equal(generator.get_state(), state));
  // The budget back up, the same input runs.
  m.steps->set_budget({false, 0, Bytes(1) << 30});
  const torch::Tensor t = targets_of(64);
  torch::manual_seed(3);
  const std::vector<torch::Tensor> planned = m.memtrain_step(x, t);
  torch::manual_seed(3);
  const std::vector<torch::Tensor> plain = m.plain_step(x, t);
  for (size_t k = 0; k < plain.size(); ++k) EXPECT_TRUE(torch::equal(planned[k], plain[k])) << "gradient " << k;
}

TEST(BlockSteps, BlocksCalledOutOfOrderAreRefusedNamingTheBlock) {
  Blocks m({false, 0, Bytes(1) << 30});
  torch::manual_seed(11);
  m.calibrate(input_of(16), targets_of(16));
  auto counted = m.memory.activate();
  try {
    m.steps->forward(1, input_of(16));
    FAIL() << "block 1 ran before block 0";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("block 1 was called before block 0"), std::string::npos) << e.what();
  }
  try {
    m.steps->forward(kBlocks, input_of(16));
    FAIL() << "a block past the last ran";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::runtime
