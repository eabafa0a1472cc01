// The CUDA path of weights in host memory (HostWeights: pinned host weights,
// copies on side streams, Adam on the host on a thread of its own): on the
// GPU, a GPT decoder trains as it does with everything on the device.
// Skipped, not failed, without a CUDA build or a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>
#ifdef MEMTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "runtime/input/brown_batches.h"
#include "runtime/memory/counting_allocator.h"
#include "runtime/memory/device_memory.h"
#include "runtime/training/trainer.h"
#include "support/gpu.h"
#include "support/tiny_tagging.h"
#include "support/training_runs.h"

// A namespace of its own: the unity build puts several test files in one unit.
namespace memtrain::runtime::cuda_weights_on_host_test {
namespace {

constexpr int kMicroBatches = 4;
constexpr int kBatch = 8;
constexpr int kSteps = 6;
constexpr std::uint64_t kSeed = 7;

std::shared_ptr<data::TaggingDataset> dataset() { return testing::shared_tiny_tagging(); }

StagedModel gpt() { return testing::tiny_gpt(dataset()->max_length, 768, 4, 4); }

testing::TrainingRun train_on_host(const std::string& planner) {
  TrainerOptions o;
  o.steps.planner = planner;
  // Half of a step with everything on the device: the CUDA libraries'
  // workspaces (75 MB on an H100) leave too little of a quarter of the
  // model state for a stage's weights and gradients.
  o.budget = {true, 50.0, 0};
  o.steps.collect_steps = 2;
  o.seed = kSeed;
  o.weights_on_host = true;
  o.micro_batches = kMicroBatches;
  o.steps.device_to_host_bandwidth = o.steps.host_to_device_bandwidth = 25e9;
  std::unique_ptr<DeviceMemory> memory = make_device_memory("cuda");
  BrownBatches source(dataset(), kBatch, kSeed, BrownTargets::NextWord);
  Trainer trainer(o, *memory, gpt, source);
  return testing::run_trainer(trainer, kSteps);
}

double largest_difference(const testing::TrainingRun& a, const testing::TrainingRun& b) {
  double most = 0;
  for (size_t k = 0; k < a.weights.size() && k < b.weights.size(); ++k) {
    most = std::max(most, (a.weights[k] - b.weights[k]).abs().max().item<double>());
  }
  return most;
}

// Whether CUDA knows p as page-locked host memory. Asked of CUDA, not of
// Tensor::is_pinned(): on torch 2.11 (an H200) that said false for the
// pool's blocks, which come from LibTorch's pinned-memory allocator.
bool page_locked(const void* p) {
#ifdef MEMTRAIN_WITH_CUDA
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
#else
  (void)p;
  return false;
#endif
}

TEST(CudaWeightsOnHost, TheHostPoolHandsOutPinnedCountedMemory) {
  MEMTRAIN_REQUIRE_GPU();
  std::unique_ptr<DeviceMemory> memory = make_device_memory("cuda");
  const Bytes before = memory->host().live();
  {
    const PoolScope host(&memory->host());
    const torch::Tensor t = torch::ones({1000});
    EXPECT_TRUE(page_locked(t.data_ptr()));
    EXPECT_EQ(memory->host().live() - before, 4000);
    const torch::Tensor on_device = t.to(memory->device(), /*non_blocking=*/true);
    EXPECT_EQ(on_device.sum().item<float>(), 1000);
  }
  EXPECT_EQ(memory->host().live(), before);
  const torch::Tensor elsewhere = torch::ones({1000});  // outside the pool: LibTorch's own memory
  EXPECT_FALSE(page_locked(elsewhere.data_ptr()));
}

TEST(CudaWeightsOnHost, WeightsInHostMemoryTrainOnTheGpuAsOnTheDevice) {
  MEMTRAIN_REQUIRE_GPU();
  std::unique_ptr<DeviceMemory> memory = make_device_memory("cuda");
  BrownBatches source(dataset(), kBatch, kSeed, BrownTargets::NextWord);
  const testing::TrainingRun reference =
      testing::train_unconstrained(*memory, gpt, source, kSeed, kMicroBatches, kSteps);
  const testing::TrainingRun grouped = train_on_host("swap");
  const testing::TrainingRun naive = train_on_host("swap-naive");
  // Both swap the same weights through the same host updates: bit for bit.
  testing::expect_same_training(grouped, naive, "swap against swap-naive");
  for (const testing::TrainingRun* r : {&grouped, &naive}) {
    EXPECT_EQ(r->summary.violations, 0);
    EXPECT_EQ(r->summary.retries, 0);
    EXPECT_GT(r->summary.per_planned_step(r->summary.planned_copies.weight_bytes), 0);
  }
  EXPECT_LT(2 * grouped.summary.per_planned_step(grouped.summary.planned_copies.weight_bytes),
            naive.summary.per_planned_step(naive.summary.planned_copies.weight_bytes));
  // Before any update the step is the device's, exactly. After it the
  // weights differ in the last bits: Adam ran on the host's cores, with other
  // kernels than the GPU's (seen: 1.4e-5 at most after 6 steps, a 1e-3
  // learning rate).
  EXPECT_EQ(grouped.losses.front(), reference.losses.front());
  ASSERT_EQ(grouped.losses.size(), reference.losses.size());
  for (size_t s = 0; s < reference.losses.size(); ++s) {
    EXPECT_NEAR(grouped.losses[s], reference.losses[s], 1e-4 * std::abs(reference.losses[s])) << "step " << s + 1;
  }
  EXPECT_LT(largest_difference(grouped, reference), 1e-4);
}

}  // namespace
}  // namespace memtrain::runtime::cuda_weights_on_host_test
