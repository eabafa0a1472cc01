#include "runtime/step/step_rollback.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "runtime/memory/device_memory.h"
#include "runtime/step/step_guard.h"
#include "support/small_resnet.h"

namespace memtrain::runtime {
namespace {

using memtrain::testing::small_resnet;

// One forward and backward of every stage, drawing from `generator` first:
// gradients accumulate, the statistics move, the generator advances.
void train_once(StagedModel& m, at::Generator& generator) {
  (void)torch::rand({4}, generator);
  StepContext ctx;
  ctx.generator = generator;
  ctx.targets = torch::randint(0, 10, {2});
  torch::Tensor x = torch::randn({2, 1, 12, 12});
  for (int i = 0; i < m.size(); ++i) x = m.stage(i).forward(x, ctx);
  x.sum().backward();
}

std::vector<torch::Tensor> buffers_of(StagedModel& m) {
  std::vector<torch::Tensor> all;
  for (int i = 0; i < m.size(); ++i) {
    for (const torch::Tensor& b : m.stage(i).buffers()) all.push_back(b.clone());
  }
  return all;
}

std::vector<torch::Tensor> grads_of(StagedModel& m) {
  std::vector<torch::Tensor> all;
  for (const torch::Tensor& p : m.parameters()) all.push_back(p.grad().defined() ? p.grad().clone() : p.grad());
  return all;
}

void expect_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].defined(), b[k].defined()) << what << " " << k;
    if (a[k].defined()) EXPECT_TRUE(torch::equal(a[k], b[k])) << what << " " << k;
  }
}

TEST(StepRollback, KeptGradientsComeBackAsTheyWereWithTheDrawsAndTheBuffers) {
  CpuDeviceMemory memory;
  StagedModel m = small_resnet();
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(3);
  train_once(m, generator);  // gradients a loop accumulated before
  const std::vector<torch::Tensor> grads = grads_of(m), buffers = buffers_of(m);
  StepRollback rollback(generator, &m, memory);
  rollback.keep_gradients(m.parameters());
  const double next_draw = torch::rand({1}, at::Generator(generator.clone())).item<double>();
  train_once(m, generator);
  rollback.roll_back();
  expect_equal(grads_of(m), grads, "gradient");
  expect_equal(buffers_of(m), buffers, "buffer");
  EXPECT_EQ(torch::rand({1}, generator).item<double>(), next_draw);
}

TEST(StepRollback, ARoundRestoresTheDrawsAndBuffersAndLeavesTheGradientsToAddTo) {
  CpuDeviceMemory memory;
  StagedModel m = small_resnet();
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(3);
  const std::vector<torch::Tensor> buffers = buffers_of(m);
  StepRollback rollback(generator, &m, memory);
  rollback.keep_gradients(m.parameters());  // none yet
  train_once(m, generator);
  rollback.restore_draws_and_buffers();
  const std::vector<torch::Tensor> once = grads_of(m);
  ASSERT_TRUE(once.front().defined());
  expect_equal(buffers_of(m), buffers, "buffer");
  train_once(m, generator);  // the same draws: the gradients doubled
  for (size_t k = 0; k < once.size(); ++k) EXPECT_TRUE(torch::allclose(m.parameters()[k].grad(), 2 * once[k]));
  rollback.roll_back();
  for (const torch::Tensor& p : m.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(StepRollback, AGuardsRollbackDiscardsTheGradientsAsItsFrontEndSays) {
  CpuDeviceMemory memory;
  StagedModel m = small_resnet();
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(3);
  int discarded = 0;
  StepGuard guard(memory, std::nullopt, false, generator, &m);
  guard.rollback().discard_gradients_with([&] {
    ++discarded;
    for (torch::Tensor& p : m.parameters()) p.mutable_grad() = torch::Tensor();
  });
  const std::vector<torch::Tensor> buffers = buffers_of(m);
  train_once(m, generator);
  guard.roll_back();
  EXPECT_EQ(discarded, 1);
  for (const torch::Tensor& p : m.parameters()) EXPECT_FALSE(p.grad().defined());
  expect_equal(buffers_of(m), buffers, "buffer");
}

}  // namespace
}  // namespace memtrain::runtime
