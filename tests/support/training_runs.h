// What the exactness tests compare: a training run's losses and final model
// state, from the trainer or from the unconstrained reference loop (model
// and Adam on the device, CPU or CUDA, each step's micro-batches forward and backward in
// turn, nothing recomputed or swapped, then Adam).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "plan/schedule_builders.h"
#include "runtime/execution/executor.h"
#include "runtime/input/batch_source.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/adam.h"
#include "runtime/training/trainer.h"

namespace memtrain::testing {

struct TrainingRun {
  std::vector<double> losses;
  std::vector<torch::Tensor> weights;  // parameters, then buffers (batch-norm statistics)
  runtime::TrainSummary summary;
  std::vector<runtime::StepRecord> records;
};

inline std::vector<torch::Tensor> model_state(runtime::StagedModel& model) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : model.parameters()) out.push_back(p.detach().cpu().clone());
  for (int i = 0; i < model.size(); ++i) {
    for (const torch::Tensor& b : model.stage(i).buffers()) out.push_back(b.cpu().clone());
  }
  return out;
}

inline TrainingRun train_unconstrained(runtime::DeviceMemory& memory,
                                       const std::function<runtime::StagedModel()>& make_model,
                                       runtime::BatchSource& source, std::uint64_t seed, int micro_batches, int steps) {
  auto scope = memory.activate();
  torch::manual_seed(seed);
  runtime::StagedModel model = make_model();
  model.to(memory.device());
  model.train(true);
  runtime::Adam adam(model.parameters(), runtime::AdamOptions{});
  runtime::Executor executor(model, memory);
  at::Generator generator = memory.make_generator(seed);
  const Schedule plain = plan::schedule_keeping_everything(model.size(), micro_batches);
  TrainingRun run;
  for (int s = 0; s < steps; ++s) {
    const runtime::Batch b = source.next(memory.device());
    runtime::StepContext ctx;
    ctx.targets = b.targets;
    ctx.key_padding = b.key_padding;
    ctx.generator = generator;
    run.losses.push_back(executor.run(plain, b, ctx).loss);
    adam.step();
    adam.zero_grad();
  }
  run.weights = model_state(model);
  return run;
}

inline TrainingRun train_unconstrained(const std::function<runtime::StagedModel()>& make_model,
                                       runtime::BatchSource& source, std::uint64_t seed, int micro_batches, int steps) {
  runtime::CpuDeviceMemory memory;
  return train_unconstrained(memory, make_model, source, seed, micro_batches, steps);
}

// `steps` steps of `trainer`: their losses, then its model state, summary and records.
inline TrainingRun run_trainer(runtime::Trainer& trainer, int steps) {
  TrainingRun run;
  for (int s = 0; s < steps; ++s) run.losses.push_back(trainer.step().loss);
  run.weights = model_state(trainer.model());
  run.summary = trainer.summary();
  run.records = trainer.records();
  return run;
}

inline void expect_same_training(const TrainingRun& a, const TrainingRun& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) EXPECT_EQ(a.losses[s], b.losses[s]) << what << " step " << s + 1;
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t k = 0; k < a.weights.size(); ++k) {
    EXPECT_TRUE(torch::equal(a.weights[k], b.weights[k])) << what << " weight " << k;
  }
}

}  // namespace memtrain::testing
