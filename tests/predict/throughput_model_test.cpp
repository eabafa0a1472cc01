#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/throughput_model.h"

namespace memtrain::predict {
namespace {

std::vector<Measurement> sample(double alpha, double beta, double a, double k, double c,
                                const std::vector<std::int64_t>& batches, double noise = 0, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, 1);
  std::vector<Measurement> rows;
  for (std::int64_t b : batches) {
    const double t = std::max(a, k * b) + c;
    rows.push_back({"m", b, static_cast<Bytes>(alpha * b + beta), t * (1 + noise * n(rng))});
  }
  return rows;
}

TEST(ThroughputModel, RecoversAKinkedStepTimeExactly) {
  // Flat at 0.30 s until batch 24 (a = 0.24 = 0.01·24), then 0.01 s per sample.
  const auto rows = sample(2e6, 5e8, 0.24, 0.01, 0.06, {2, 4, 8, 16, 32, 48, 64});
  const ThroughputModel m = fit_throughput_model(rows);
  EXPECT_NEAR(m.alpha, 2e6, 1);
  EXPECT_NEAR(m.beta, 5e8, 64);
  EXPECT_NEAR(m.k, 0.01, 1e-9);
  EXPECT_NEAR(m.a, 0.24, 1e-7);
  EXPECT_NEAR(m.c, 0.06, 1e-7);
  EXPECT_NEAR(m.saturation_batch(), 24, 1e-5);
  EXPECT_GT(m.r2_memory, 0.999999);
  EXPECT_GT(m.r2_time, 0.999999);
  EXPECT_NEAR(m.step_seconds(10), 0.30, 1e-7);
  EXPECT_NEAR(m.throughput(100), 100 / 1.06, 1e-5);
  EXPECT_EQ(m.points, 7);
  EXPECT_EQ(m.min_batch, 2);
  EXPECT_EQ(m.max_batch, 64);
}

TEST(ThroughputModel, AStraightLineHasItsKneeAtOrBelowTheFirstBatch) {
  const ThroughputModel m = fit_throughput_model(sample(1e6, 1e8, 0, 0.02, 0.1, {4, 8, 16, 32}));
  EXPECT_NEAR(m.k, 0.02, 1e-9);
  EXPECT_LE(m.saturation_batch(), 4 + 1e-9);
  EXPECT_NEAR(m.step_seconds(64), 1.38, 1e-7);
}

TEST(ThroughputModel, TheKinkBeatsALineOnKinkedData) {
  // A line through kinked data leaves residuals the hinge does not.
  const auto rows = sample(1e6, 1e8, 0.5, 0.01, 0.1, {5, 10, 20, 40, 60, 80, 100, 120});
  const ThroughputModel m = fit_throughput_model(rows);
  EXPECT_GT(m.r2_time, 0.9999);
  EXPECT_NEAR(m.saturation_batch(), 50, 0.5);
}

TEST(ThroughputModel, NoisyMeasurementsStillFitWell) {
  const ThroughputModel m =
      fit_throughput_model(sample(3e6, 2e8, 0.2, 0.005, 0.05, {8, 16, 24, 32, 48, 64, 96, 128}, 0.01));
  EXPECT_GT(m.r2_time, 0.97);
  EXPECT_NEAR(m.k, 0.005, 0.0005);
}

TEST(ThroughputModel, FindsAMemoryFloorUnderSmallBatches) {
  // The update's 60 MB peak sets the peak up to batch 20; above it 1 MB/sample.
  std::vector<Measurement> rows;
  for (std::int64_t b : {4, 8, 16, 32, 64, 128}) {
    rows.push_back({"m", b, std::max<Bytes>(60000000, 40000000 + 1000000 * b), 0.01 * b + 0.1});
  }
  const ThroughputModel m = fit_throughput_model(rows);
  EXPECT_NEAR(m.alpha, 1e6, 1);
  EXPECT_NEAR(m.beta, 4e7, 64);
  EXPECT_NEAR(m.memory_floor, 6e7, 64);
  EXPECT_GT(m.r2_memory, 0.999999);
  EXPECT_NEAR(m.peak_bytes(200), 2.4e8, 64);
  EXPECT_NEAR(m.peak_bytes(2), 6e7, 64);
  // A plain line has no floor.
  EXPECT_EQ(fit_throughput_model(sample(2e6, 5e8, 0, 0.01, 0.1, {4, 8, 16, 32})).memory_floor, 0);
}

TEST(ThroughputModel, SmallBatchesCountAsMuchAsLargeOnes) {
  // Relative least squares: a 10% miss at batch 4 weighs as much as one at 256,
  // so the fit follows the small batches too instead of only the large times.
  std::vector<Measurement> rows;
  for (std::int64_t b : {4, 8, 16, 32, 64, 128, 256}) rows.push_back({"m", b, 1000 * b, 0.02 + 0.004 * b});
  rows[0].step_seconds *= 1.02;
  rows[6].step_seconds *= 1.02;
  const ThroughputModel m = fit_throughput_model(rows);
  for (const Measurement& r : rows) {
    EXPECT_NEAR(m.step_seconds(static_cast<double>(r.batch)) / r.step_seconds, 1.0, 0.025) << r.batch;
  }
}

TEST(ThroughputModel, RefusesTooFewPointsOrOneBatchSize) {
  try {
    fit_throughput_model(sample(1, 1, 1, 1, 1, {1, 2, 3}));
    FAIL() << "fitted 3 points";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected at least 4"), std::string::npos) << e.what();
  }
  try {
    fit_throughput_model(sample(1, 1, 1, 1, 1, {8, 8, 8, 8}));
    FAIL() << "fitted one batch size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 distinct batch sizes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::predict
