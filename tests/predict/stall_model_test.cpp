#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/stall_model.h"

namespace memtrain::predict {
namespace {

// G 1000/s; a thread decodes 400/s from memory and reads 200/s from storage.
StallRates rates(int cores) { return {1000, 400, 200, cores}; }

TEST(StallModel, ThreadsAddUpUntilTheCoresAreBusyDecoding) {
  // All cached: each thread makes 400/s, capped at cores * 400.
  EXPECT_DOUBLE_EQ(pipeline_rate(rates(2), 1.0, 1), 400);
  EXPECT_DOUBLE_EQ(pipeline_rate(rates(2), 1.0, 2), 800);
  EXPECT_DOUBLE_EQ(pipeline_rate(rates(2), 1.0, 4), 800);
  // Nothing cached: a sample holds its thread 1/400 + 1/200 s, but the wait
  // for storage needs no core, so 4 threads on 2 cores make 4 / 0.0075 /s.
  EXPECT_NEAR(pipeline_rate(rates(2), 0.0, 1), 1 / 0.0075, 1e-9);
  EXPECT_NEAR(pipeline_rate(rates(2), 0.0, 4), 4 / 0.0075, 1e-9);
  EXPECT_DOUBLE_EQ(pipeline_rate(rates(2), 0.0, 8), 800);
  // Half cached: half the samples wait for storage.
  EXPECT_NEAR(pipeline_rate(rates(4), 0.5, 1), 1 / (0.0025 + 0.0025), 1e-9);
}

TEST(StallModel, TheEpochRunsAtTheSlowerOfTrainingAndThePipelineAndNamesIt) {
  const EpochPrediction fetch = predict_epoch(rates(2), 3000, 0.0, 1);
  EXPECT_NEAR(fetch.epoch_seconds, 3000 * 0.0075, 1e-9);
  EXPECT_EQ(fetch.bottleneck, "fetch");
  const EpochPrediction prep = predict_epoch(rates(1), 3000, 1.0, 4);
  EXPECT_NEAR(prep.epoch_seconds, 3000 / 400.0, 1e-9);
  EXPECT_EQ(prep.bottleneck, "prep");
  const EpochPrediction ingestion = predict_epoch(rates(4), 3000, 1.0, 4);
  EXPECT_NEAR(ingestion.epoch_seconds, 3.0, 1e-9);
  EXPECT_EQ(ingestion.bottleneck, "ingestion");
  // More cache never makes it slower, nor do more threads.
  double last = 1e9;
  for (double x : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const double t = predict_epoch(rates(2), 3000, x, 2).epoch_seconds;
    EXPECT_LE(t, last);
    last = t;
  }
}

TEST(StallModel, RefusesRatesAndSettingsOutOfRange) {
  EXPECT_THROW(pipeline_rate({0, 400, 200, 1}, 0.5, 1), Error);
  EXPECT_THROW(pipeline_rate({1000, 400, -1, 1}, 0.5, 1), Error);
  EXPECT_THROW(pipeline_rate({1000, 400, 200, 0}, 0.5, 1), Error);
  EXPECT_THROW(pipeline_rate(rates(1), 1.5, 1), UsageError);
  EXPECT_THROW(pipeline_rate(rates(1), 0.5, 0), UsageError);
}

}  // namespace
}  // namespace memtrain::predict
