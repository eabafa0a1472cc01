// The trainer with weights, gradients and Adam state in host memory
// (--weights-on host): a GPT decoder whose model state is several times the
// device budget trains exactly as it does with everything on the device.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/input/brown_batches.h"
#include "runtime/training/trainer.h"
#include "support/tiny_tagging.h"
#include "support/training_runs.h"

// A namespace of its own: the unity build puts several test files in one unit.
namespace memtrain::runtime::weights_on_host_test {
namespace {

using testing::expect_same_training;
using testing::TrainingRun;

constexpr int kMicroBatches = 4;
constexpr int kBatch = 8;
constexpr std::uint64_t kSeed = 7;
constexpr double kLink = 4e9;  // bytes/s each way

std::shared_ptr<data::TaggingDataset> dataset() { return testing::shared_tiny_tagging(); }

// Weight-heavy: four wide blocks over short sentences of a 62-word vocabulary.
StagedModel gpt() { return testing::tiny_gpt(dataset()->max_length, 192, 2, 4); }

// Weights, gradients and Adam's two moments.
Bytes model_state_bytes() {
  Bytes b = 0;
  for (const torch::Tensor& p : gpt().parameters()) b += 4 * static_cast<Bytes>(p.nbytes());
  return b;
}

TrainerOptions host_options(const std::string& planner, Bytes budget) {
  TrainerOptions o;
  o.steps.planner = planner;
  o.budget = {false, 0, budget};
  o.steps.collect_steps = 2;
  o.seed = kSeed;
  o.weights_on_host = true;
  o.micro_batches = kMicroBatches;
  o.steps.device_to_host_bandwidth = o.steps.host_to_device_bandwidth = kLink;
  return o;
}

TrainingRun train(const TrainerOptions& options, int steps) {
  CpuDeviceMemory memory;
  BrownBatches source(dataset(), kBatch, kSeed, BrownTargets::NextWord);
  Trainer trainer(options, memory, gpt, source);
  return testing::run_trainer(trainer, steps);
}

constexpr int kSteps = 8;

TrainingRun train_on_device() {
  BrownBatches source(dataset(), kBatch, kSeed, BrownTargets::NextWord);
  return testing::train_unconstrained(gpt, source, kSeed, kMicroBatches, kSteps);
}

TEST(TrainerWeightsOnHost, AModelFourTimesTheBudgetTrainsExactlyAsOnTheDevice) {
  const Bytes budget = model_state_bytes() / 4;
  const TrainingRun reference = train_on_device();
  for (const char* planner : {"swap", "swap-naive"}) {
    const TrainingRun r = train(host_options(planner, budget), kSteps);
    expect_same_training(reference, r, planner);
    EXPECT_EQ(r.summary.budget_bytes, budget);
    EXPECT_EQ(r.summary.violations, 0) << planner;
    EXPECT_LE(r.summary.max_peak_bytes, budget) << planner;
    EXPECT_EQ(r.summary.retries, 0) << planner;
    // After collection, the Simulator's peak on the predicted micro-batch chain is near the measured one.
    EXPECT_LT(r.summary.median_prediction_error, 0.10) << planner;
    EXPECT_GT(r.summary.per_planned_step(r.summary.planned_copies.weight_bytes), 0) << planner;
    EXPECT_LE(r.summary.per_planned_step(r.summary.planned_copies.weight_bytes),
              r.summary.per_planned_step(r.summary.planned_copies.bytes()))
        << planner;
    Bytes weight_bytes = 0;
    for (const torch::Tensor& w : r.weights) weight_bytes += static_cast<Bytes>(w.nbytes());
    for (const StepRecord& rec : r.records) {
      EXPECT_EQ(rec.copies.to_host_bytes + rec.copies.to_device_bytes, rec.copies.bytes())
          << planner << " step " << rec.step;
      if (std::string(planner) == "swap" && rec.plan != PlanKind::Collect) {
        // Each gradient goes to the host once a step; offloaded activations come back as they left.
        const Bytes activations = (rec.copies.bytes() - rec.copies.weight_bytes) / 2;
        EXPECT_EQ(rec.copies.to_host_bytes - activations, weight_bytes) << "step " << rec.step;
      }
      // A stage's first backward makes its gradients, which the Simulator
      // counts on top of a temporary measured with them in it: predictions
      // err high by up to a stage's gradients, never low.
      if (rec.plan != PlanKind::Collect) {
        EXPECT_GE(rec.predicted_peak_bytes, rec.peak_bytes) << planner << " step " << rec.step;
      }
      EXPECT_NE(rec.schedule.to_string().find("Win"), std::string::npos) << planner << " step " << rec.step;
      EXPECT_NE(rec.schedule.to_string().find("@3"), std::string::npos)
          << planner << " step " << rec.step << ": 4 micro-batches";
    }
  }
}

TEST(TrainerWeightsOnHost, HarmonyMovesFewerWeightBytesThanPerStageSwappingWhenMeasured) {
  const Bytes budget = model_state_bytes() / 3;
  const TrainingRun grouped = train(host_options("swap", budget), 5);
  const TrainingRun naive = train(host_options("swap-naive", budget), 5);
  // Past collection, which swaps stage by stage in both.
  Bytes grouped_bytes = 0, naive_bytes = 0;
  for (size_t k = 2; k < grouped.records.size(); ++k) {
    grouped_bytes += grouped.records[k].copies.weight_bytes;
    naive_bytes += naive.records[k].copies.weight_bytes;
  }
  EXPECT_GT(grouped_bytes, 0);
  EXPECT_LT(2 * grouped_bytes, naive_bytes);
  // The summary's copy figures are the planned steps': collection, which
  // swaps every stage's weights for every micro-batch, is counted apart.
  long collection_steps = 0;
  Bytes planned_bytes = 0, collection_bytes = 0;
  for (const StepRecord& rec : grouped.records) {
    if (rec.plan == PlanKind::Collect) {
      ++collection_steps;
      collection_bytes += rec.copies.weight_bytes;
    } else {
      planned_bytes += rec.copies.weight_bytes;
    }
  }
  ASSERT_GT(collection_steps, 0);
  ASSERT_LT(collection_steps, grouped.summary.steps);
  EXPECT_EQ(grouped.summary.collection_steps, collection_steps);
  EXPECT_DOUBLE_EQ(grouped.summary.per_planned_step(grouped.summary.planned_copies.weight_bytes),
                   static_cast<double>(planned_bytes) / static_cast<double>(grouped.summary.steps - collection_steps));
  EXPECT_LT(grouped.summary.per_planned_step(grouped.summary.planned_copies.weight_bytes),
            static_cast<double>(collection_bytes) / collection_steps);
}

TEST(TrainerWeightsOnHost, AMispredictedStepIsRetriedWithNoUpdateAppliedTwice) {
  const TrainingRun reference = train_on_device();
  TrainerOptions o = host_options("swap", model_state_bytes() / 3);
  o.steps.prediction_scale = 0.2;  // the planner believes activations are a fifth of their size
  const TrainingRun r = train(o, kSteps);
  EXPECT_GT(r.summary.retries, 0);
  EXPECT_EQ(r.summary.violations, 0);
  expect_same_training(reference, r, "retried");
}

void expect_usage_error(const TrainerOptions& o, const std::string& says) {
  CpuDeviceMemory memory;
  BrownBatches source(dataset(), kBatch, kSeed, BrownTargets::NextWord);
  try {
    Trainer trainer(o, memory, gpt, source);
    trainer.calibrate();
    ADD_FAILURE() << "expected a UsageError saying: " << says;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(TrainerWeightsOnHost, RefusesWhatDoesNotGoTogether) {
  const Bytes budget = model_state_bytes() / 3;
  expect_usage_error(host_options("optimal", budget), "expected one of: swap, swap-naive");
  TrainerOptions on_device = host_options("swap-naive", budget);
  on_device.weights_on_host = false;
  on_device.micro_batches = 1;
  expect_usage_error(on_device, "swaps weights kept in host memory; it needs weights_on_host");
  TrainerOptions no_link = host_options("swap", budget);
  no_link.steps.device_to_host_bandwidth = 0;
  expect_usage_error(no_link, "bandwidth");
  TrainerOptions too_many = host_options("swap", budget);
  too_many.micro_batches = kBatch + 1;
  expect_usage_error(too_many, "expected at most 8");
}

// A given link far from what the copies reach: the trainer follows the
// copies' own rates (the median over its recent steps, each direction on
// its own) unless told to keep the given one; every direction's seconds
// are recorded.
TEST(TrainerWeightsOnHost, RefinesTheHostLinkFromItsOwnCopies) {
  const Bytes budget = model_state_bytes() / 4;
  TrainerOptions o = host_options("swap", budget);
  o.steps.device_to_host_bandwidth = o.steps.host_to_device_bandwidth = 1e15;  // a petabyte a second
  const TrainingRun refined = train(o, 5);
  predict::LinkEstimate expected(1e15, 1e15);
  for (const StepRecord& rec : refined.records) {
    EXPECT_GT(rec.copies.to_host_seconds, 0) << "step " << rec.step;
    EXPECT_GT(rec.copies.to_device_seconds, 0) << "step " << rec.step;
    EXPECT_NEAR(rec.copies.to_host_seconds + rec.copies.to_device_seconds, rec.copies.seconds(), 1e-12)
        << "step " << rec.step;
    expected.observe(rec.copies.to_host_bytes, rec.copies.to_host_seconds, rec.copies.to_device_bytes,
                     rec.copies.to_device_seconds);
  }
  ASSERT_GT(expected.device_to_host_steps(), 0);
  EXPECT_LT(refined.summary.to_host_bandwidth, 1e14);
  EXPECT_EQ(refined.summary.to_host_bandwidth, expected.device_to_host());
  EXPECT_EQ(refined.summary.to_device_bandwidth, expected.host_to_device());

  o.steps.refine_link = false;
  const TrainingRun fixed = train(o, 3);
  EXPECT_EQ(fixed.summary.to_host_bandwidth, 1e15);
  EXPECT_EQ(fixed.summary.to_device_bandwidth, 1e15);
}

}  // namespace
}  // namespace memtrain::runtime::weights_on_host_test
