// The graph trainer's steps under an enforced budget: an attempt that runs
// out is rolled back and run again under a stricter plan, losing nothing.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "runtime/input/fashion_mnist_batches.h"
#include "runtime/training/graph_trainer.h"
#include "support/fashion_mnist_images.h"
#include "support/small_unet.h"

namespace memtrain::runtime {
namespace {

// A U-Net trained on a few batches of one size by its own GraphTrainer.
struct UNetRun {
  CpuDeviceMemory memory;
  FashionMnistBatches batches{testing::fashion_mnist_test_images(), 8, 16, 16, 3};
  std::unique_ptr<GraphTrainer> trainer;
  std::vector<StepRecord> records;

  explicit UNetRun(const GraphTrainerOptions& options)
      : trainer(std::make_unique<GraphTrainer>(options, memory, testing::small_unet(memory, 4), batches)) {}
  void train(int steps) {
    for (int s = 0; s < steps; ++s) records.push_back(trainer->step());
  }
};

GraphTrainerOptions options_at(double percent, double prediction_scale, bool enforce) {
  GraphTrainerOptions o;
  o.budget = {true, percent, 0};
  o.time_limit = 20;
  o.prediction_scale = prediction_scale;
  o.enforce = enforce;
  return o;
}

TEST(GraphTrainer, AStepThatRunsOutIsRetriedUnderAStricterPlanAndLosesNothing) {
  // Plans made on a graph whose activations look 5% smaller than they are
  // run out of the enforced budget, here in the backward, after a node's
  // backward has added into the weights' gradients; the reference keeps
  // everything.
  UNetRun retried(options_at(98, 0.95, true)), reference(options_at(100, 1.0, true));
  retried.train(3);
  reference.train(3);
  EXPECT_GT(retried.records[0].retries, 0) << "the first plan priced the activations too low";
  EXPECT_EQ(retried.trainer->retries(),
            retried.records[0].retries + retried.records[1].retries + retried.records[2].retries);
  EXPECT_EQ(retried.records[1].retries, 0) << "the size keeps the stricter plan";
  for (const StepRecord& r : retried.records) {
    EXPECT_FALSE(r.violation) << "step " << r.step;
    EXPECT_LE(r.peak_bytes, r.budget_bytes) << "step " << r.step;
  }
  // Bit for bit the run that never ran out: no failed attempt's gradient survived.
  for (std::size_t s = 0; s < 3; ++s) EXPECT_EQ(retried.records[s].loss, reference.records[s].loss) << "step " << s;
  const auto x = retried.trainer->model().parameters(), y = reference.trainer->model().parameters();
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t k = 0; k < x.size(); ++k) EXPECT_TRUE(torch::equal(x[k], y[k])) << "parameter " << k;
}

TEST(GraphTrainer, UnenforcedTheSamePlansCountViolationsInstead) {
  UNetRun run(options_at(98, 0.95, false));
  run.train(2);
  EXPECT_EQ(run.trainer->retries(), 0);
  EXPECT_TRUE(run.records[0].violation) << "peak " << run.records[0].peak_bytes << " budget "
                                        << run.records[0].budget_bytes;
}

TEST(GraphTrainer, RetriesThatRunOutAreAFailureNamingTheStep) {
  GraphTrainerOptions o = options_at(98, 0.95, true);
  o.max_retries = 0;
  UNetRun run(o);
  try {
    run.train(1);
    FAIL() << "a step with no retries left ran";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("step 1: input"), std::string::npos) << what;
    EXPECT_NE(what.find("still ran out of budget after 0 stricter schedules"), std::string::npos) << what;
  }
  // Nothing of the failed attempt stays: no gradient.
  for (const torch::Tensor& p : run.trainer->model().parameters()) {
    EXPECT_TRUE(!p.grad().defined() || p.grad().abs().sum().item<double>() == 0);
  }
}

}  // namespace
}  // namespace memtrain::runtime
