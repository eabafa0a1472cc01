// Weights in host memory (HostWeights) with micro-batches: a swapped step
// computes exactly what a step with the weights on the device does.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "plan/weight_swap_schedules.h"
#include "runtime/builtin_models/gpt_decoder.h"
#include "runtime/execution/executor.h"
#include "runtime/execution/host_weights.h"
#include "runtime/input/brown_batches.h"
#include "support/schedule_text.h"
#include "support/tiny_tagging.h"

// A namespace of its own: the unity build puts several test files in one unit.
namespace memtrain::runtime::weight_swap_execution_test {
namespace {

constexpr int kMicroBatches = 4;

// A small GPT decoder (4 stages) trained on next words, its weights and
// Adam state on the device or in the host pool.
struct GptRig {
  CpuDeviceMemory memory;
  std::shared_ptr<data::TaggingDataset> data = testing::tiny_tagging();
  std::unique_ptr<StagedModel> model;
  std::unique_ptr<Adam> adam;
  std::unique_ptr<HostWeights> host_weights;
  std::unique_ptr<Executor> executor;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(5);

  explicit GptRig(bool weights_on_host) {
    auto scope = memory.activate();
    PoolScope where(weights_on_host ? &memory.host() : &memory.pool());
    torch::manual_seed(3);
    GptDecoderConfig c;
    c.vocabulary = 62;
    c.max_length = data->max_length;
    c.width = 16;
    c.heads = 2;
    c.layers = 2;
    c.dropout = 0.1;
    model = std::make_unique<StagedModel>(make_gpt_decoder(c));
    adam = std::make_unique<Adam>(model->parameters(), AdamOptions{});
    executor = std::make_unique<Executor>(*model, memory);
    if (weights_on_host) {
      host_weights = std::make_unique<HostWeights>(*model, *adam, memory);
      executor->set_host_weights(host_weights.get());
    }
  }

  Batch batch(int index) {
    auto scope = memory.activate();
    BrownBatches source(data, 16, 9, BrownTargets::NextWord);
    for (int i = 0; i < index; ++i) source.next(torch::kCPU);
    return source.next(torch::kCPU);
  }

  // One training step: the schedule, then the update (on the host, staged
  // per stage, for host weights).
  ExecutionResult step(const Schedule& schedule, const Batch& b) {
    auto scope = memory.activate();
    StepContext ctx;
    ctx.targets = b.targets;
    ctx.key_padding = b.key_padding;
    ctx.generator = generator;
    ExecutionResult r = executor->run(schedule, b, ctx);
    if (host_weights) {
      host_weights->commit();
    } else {
      adam->step();
      adam->zero_grad();
    }
    return r;
  }
};

void expect_same_weights(GptRig& a, GptRig& b, const std::string& what) {
  const auto p = a.model->parameters(), q = b.model->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (size_t k = 0; k < p.size(); ++k) {
    EXPECT_TRUE(torch::equal(p[k], q[k])) << what << ": parameter " << k;
  }
}

TEST(WeightSwapExecution, SwappedStepsTrainExactlyLikeStepsWithTheWeightsOnTheDevice) {
  GptRig reference(false);
  const int n = reference.model->size();
  ASSERT_EQ(n, 4);
  const Schedule plain = plan::schedule_keeping_everything(n, kMicroBatches);
  const std::vector<std::pair<std::string, Schedule>> swapped = {
      {"per stage", plan::per_layer_swap_schedule(n, kMicroBatches, true)},
      {"one pack", plan::grouped_swap_schedule(n, kMicroBatches, {0}, false)},
      {"two packs", plan::grouped_swap_schedule(n, kMicroBatches, {0, 2}, true)},
      {"four packs", plan::grouped_swap_schedule(n, kMicroBatches, {0, 1, 2, 3}, false)},
      {"two packs, inputs offloaded", plan::grouped_swap_schedule(n, kMicroBatches, {0, 2}, true, true)},
      {"four packs, inputs offloaded", plan::grouped_swap_schedule(n, kMicroBatches, {0, 1, 2, 3}, false, true)}};
  std::vector<double> losses;
  for (int k = 0; k < 3; ++k) losses.push_back(reference.step(plain, reference.batch(k)).loss);
  // Updates inline (the CPU build's default) and on a host thread of their
  // own (a GPU's), racing the schedule's compute and copies.
  for (bool own_thread : {false, true}) {
    for (const auto& [schedule_name, schedule] : swapped) {
      const std::string name = schedule_name + (own_thread ? ", updates on their own thread" : "");
      GptRig rig(true);
      rig.host_weights->set_updates_on_own_thread(own_thread);
      for (int k = 0; k < 3; ++k) {
        const Bytes device_before = rig.memory.live();
        const ExecutionResult r = rig.step(schedule, rig.batch(k));
        EXPECT_EQ(r.loss, losses[k]) << name << " step " << k;
        EXPECT_GT(r.copies.weight_bytes, 0);
        EXPECT_EQ(rig.memory.live(), device_before) << name << ": no weight or gradient stays on the device";
      }
      expect_same_weights(reference, rig, name);
    }
  }
}

TEST(WeightSwapExecution, WeightsOnTheDeviceOnlyWhileTheirPackRuns) {
  GptRig rig(true);
  const int n = rig.model->size();
  Bytes all_weights = 0;
  for (int i = 0; i < n; ++i) all_weights += rig.model->stage_weight_bytes(i);
  const Batch b = rig.batch(0);
  const ExecutionResult r = rig.step(plan::grouped_swap_schedule(n, kMicroBatches, {0, 1, 2, 3}, false), b);
  std::vector<bool> has_grads(n, false);
  for (const OpRecord& rec : r.ops) {
    if (rec.op.kind == OpKind::Backward) has_grads[rec.op.stage] = true;
    const Bytes weights = rig.model->stage_weight_bytes(rec.op.stage < 0 ? 0 : rec.op.stage);
    if (rec.op.kind == OpKind::FetchWeights) {
      EXPECT_EQ(rec.output_bytes, weights);
      EXPECT_EQ(rec.live_after - rec.live_before, weights) << "a fetch allocates the stage's weights on the device";
    }
    if (rec.op.kind == OpKind::DropWeights) {
      // After the stage's backward its gradients go too.
      EXPECT_EQ(rec.live_before - rec.live_after, (has_grads[rec.op.stage] ? 2 : 1) * weights)
          << "drop of stage " << rec.op.stage;
    }
  }
  // In for the forward, in again for the backward but the last pack, gradients out once.
  EXPECT_EQ(r.copies.weight_bytes, 3 * all_weights - rig.model->stage_weight_bytes(n - 1));
}

TEST(WeightSwapExecution, AFailedStepUpdatesNothing) {
  GptRig rig(true);
  GptRig untouched(true);
  const int n = rig.model->size();
  // Stage 3 is updated, then the schedule fails before the others are.
  Schedule s = plan::grouped_swap_schedule(n, 1, {0, 3}, false);
  size_t cut = 0;
  while (!(s.ops[cut].kind == OpKind::Update && s.ops[cut].stage == 3)) ++cut;
  s.ops.resize(cut + 1);
  s.backward(0);  // no gradient reaches it yet: the executor refuses
  auto scope = rig.memory.activate();
  StepContext ctx;
  const Batch b = rig.batch(0);
  ctx.targets = b.targets;
  ctx.generator = rig.generator;
  EXPECT_THROW(rig.executor->run(s, b, ctx), Error);
  rig.host_weights->abandon();
  expect_same_weights(untouched, rig, "after a failed step");
  EXPECT_EQ(rig.adam->steps(), 0);
}

TEST(WeightSwapExecution, RefusesWeightOperationsWithoutHostWeightsAndSplitsNoFewerRowsThanMicroBatches) {
  GptRig rig(false);
  auto scope = rig.memory.activate();
  const Batch b = rig.batch(0);
  StepContext ctx;
  ctx.targets = b.targets;
  ctx.generator = rig.generator;
  EXPECT_THROW(rig.executor->run(testing::parse_schedule("Win0"), b, ctx), Error);
  try {
    rig.executor->run(plan::schedule_keeping_everything(rig.model->size(), 17), b, ctx);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16 examples cannot be split into 17 micro-batches"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace memtrain::runtime::weight_swap_execution_test
