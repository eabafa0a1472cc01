// The CUDA path of offload (pinned host memory, side streams, events): an
// offloaded step on the GPU computes exactly what a plain one does, whether it
// offloads checkpoints or everything forwards saved. Skipped, not failed,
// without a CUDA build or a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "plan/schedule_builders.h"
#include "runtime/execution/executor.h"
#include "runtime/input/brown_batches.h"
#include "runtime/memory/device_memory.h"
#include "support/gpu.h"
#include "support/offload_schedules.h"
#include "support/tiny_tagging.h"

namespace memtrain::runtime {
namespace {

struct GpuStep {
  double loss = 0;
  std::vector<torch::Tensor> grads;  // on the CPU
  ExecutionResult result;
};

// One step of the tiny tagger on cuda:0 with `schedule`, from seed 3.
GpuStep step_on_gpu(const Schedule& schedule) {
  std::unique_ptr<DeviceMemory> memory = make_device_memory("cuda");
  const auto scope = memory->activate();
  const auto data = testing::tiny_tagging();
  torch::manual_seed(3);
  StagedModel model = testing::tiny_tagger(testing::tiny_shape(*data), 0.1);
  model.to(memory->device());
  model.train(true);
  BrownBatches source(data, 16, 9);
  const Batch batch = source.next(memory->device());
  StepContext ctx;
  ctx.targets = batch.targets;
  ctx.key_padding = batch.key_padding;
  ctx.generator = memory->make_generator(3);
  Executor executor(model, *memory);
  GpuStep out;
  out.result = executor.run(schedule, batch, ctx);
  out.loss = out.result.loss;
  for (const auto& p : model.parameters()) out.grads.push_back(p.grad().cpu());
  return out;
}

TEST(CudaOffload, AnOffloadedStepOnTheGpuComputesExactlyWhatAPlainOneDoes) {
  MEMTRAIN_REQUIRE_GPU();
  const int n = 6;
  const GpuStep plain = step_on_gpu(plan::schedule_keeping_everything(n));
  const GpuStep offloaded = step_on_gpu(testing::offloading_every_checkpoint(n, /*late=*/true));
  EXPECT_EQ(offloaded.loss, plain.loss);
  ASSERT_EQ(offloaded.grads.size(), plain.grads.size());
  for (size_t k = 0; k < plain.grads.size(); ++k) {
    EXPECT_TRUE(torch::equal(offloaded.grads[k], plain.grads[k])) << "parameter " << k;
  }
  EXPECT_GT(offloaded.result.copies.bytes(), 0);
  EXPECT_GT(offloaded.result.copies.seconds(), 0);
  EXPECT_LT(offloaded.result.peak, plain.result.peak);
}

TEST(CudaOffload, OffloadingWhatForwardsSaveOnTheGpuComputesExactlyWhatAPlainStepDoes) {
  MEMTRAIN_REQUIRE_GPU();
  const int n = 6;
  const GpuStep plain = step_on_gpu(plan::schedule_keeping_everything(n));
  for (bool late : {false, true}) {
    const GpuStep offloaded = step_on_gpu(testing::offloading_what_forwards_save(n, late));
    EXPECT_EQ(offloaded.loss, plain.loss) << "late " << late;
    ASSERT_EQ(offloaded.grads.size(), plain.grads.size());
    for (size_t k = 0; k < plain.grads.size(); ++k) {
      EXPECT_TRUE(torch::equal(offloaded.grads[k], plain.grads[k])) << "late " << late << ", parameter " << k;
    }
    EXPECT_GT(offloaded.result.copies.to_host_bytes, 0);
    EXPECT_EQ(offloaded.result.copies.to_device_bytes, offloaded.result.copies.to_host_bytes)
        << "everything that left came back";
    EXPECT_LT(offloaded.result.peak, plain.result.peak) << "late " << late;
  }
}

}  // namespace
}  // namespace memtrain::runtime
