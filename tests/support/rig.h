// A model, its optimizer state and a batch source in one counted device
// memory, as the trainer sets them up, for tests that drive the executor.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "runtime/execution/executor.h"
#include "runtime/input/brown_batches.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/adam.h"
#include "runtime/model/rng_snapshot.h"
#include "support/tiny_tagging.h"

namespace memtrain::testing {

struct Rig {
  runtime::CpuDeviceMemory memory;
  std::shared_ptr<data::TaggingDataset> data = tiny_tagging();
  std::unique_ptr<runtime::StagedModel> model;
  std::unique_ptr<runtime::Adam> adam;
  at::Generator generator;

  explicit Rig(double dropout = 0.1, std::uint64_t seed = 3) {
    auto scope = memory.activate();
    torch::manual_seed(seed);
    model = std::make_unique<runtime::StagedModel>(tiny_tagger(tiny_shape(*data), dropout));
    adam = std::make_unique<runtime::Adam>(model->parameters(), runtime::AdamOptions{});
    generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  }

  // The `index`-th batch of a seeded order (the same in every Rig).
  runtime::Batch batch(int index = 0, std::int64_t size = 16) {
    auto scope = memory.activate();
    runtime::BrownBatches source(data, size, 9);
    for (int i = 0; i < index; ++i) source.next(torch::kCPU);
    return source.next(torch::kCPU);
  }

  runtime::ExecutionResult run(const Schedule& schedule, const runtime::Batch& b) {
    auto scope = memory.activate();
    runtime::StepContext ctx;
    ctx.targets = b.targets;
    ctx.key_padding = b.key_padding;
    ctx.generator = generator;
    runtime::Executor executor(*model, memory);
    return executor.run(schedule, b, ctx);
  }
};

// `rig`'s step `r` computed exactly what `plain`'s step `reference` did: the
// same loss and weight gradients, bit for bit.
inline void expect_same_step(const Rig& plain, const runtime::ExecutionResult& reference, const Rig& rig,
                             const runtime::ExecutionResult& r, const std::string& label) {
  EXPECT_EQ(r.loss, reference.loss) << label;
  const auto p = plain.model->parameters(), q = rig.model->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (size_t k = 0; k < p.size(); ++k) {
    EXPECT_TRUE(torch::equal(p[k].grad(), q[k].grad())) << label << " parameter " << k;
  }
}

}  // namespace memtrain::testing
