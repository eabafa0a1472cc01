// From executed operations to the cost model, on hand-made records.
#include <gtest/gtest.h>

#include "runtime/execution/chain_measurement.h"

namespace memtrain::runtime::chain_measurement_test {
namespace {

OpRecord record(OpKind kind, int stage, int micro, Seconds seconds, Seconds wait = 0) {
  OpRecord r;
  r.op = {kind, stage, 0, micro};
  r.seconds = seconds;
  r.wait_seconds = wait;
  return r;
}

OpRecord forward(OpKind kind, int stage, int micro, Seconds seconds, Bytes input, Bytes before, Bytes after,
                 int variant = 0) {
  OpRecord r = record(kind, stage, micro, seconds);
  r.op.variant = variant;
  r.input_bytes = input;
  r.live_before = before;
  r.live_after = r.peak = after;
  return r;
}

// Stage 0 of three micro-batches, the last one smaller; stage 1 checkpointed
// and recomputed.
ExecutionResult micro_batched_step() {
  ExecutionResult result;
  result.ops = {forward(OpKind::ForwardAll, 0, 0, 3e-3, 16, 0, 10),
                forward(OpKind::ForwardAll, 0, 1, 1e-3, 16, 10, 30),
                forward(OpKind::ForwardAll, 0, 2, 0.5e-3, 8, 30, 35),
                forward(OpKind::ForwardCheckpoint, 1, 0, 9e-3, 4, 35, 36),
                forward(OpKind::ForwardAll, 1, 0, 7e-3, 4, 36, 40),
                forward(OpKind::ForwardAll, 1, 1, 5e-3, 4, 40, 44),
                forward(OpKind::ForwardAll, 1, 1, 8e-3, 4, 44, 48, /*variant=*/1),
                record(OpKind::Backward, 1, 0, 6e-3),
                record(OpKind::Backward, 1, 1, 2e-3),
                record(OpKind::Backward, 0, 0, 4e-3),
                record(OpKind::Backward, 0, 1, 2e-3),
                record(OpKind::Backward, 0, 2, 1e-3)};
  return result;
}

// Micro-batch 0 runs first on weights just fetched; the step's cost is every
// micro-batch's, so its times are the mean over those of its size. Memory is
// micro-batch 0's alone.
TEST(ChainMeasurement, TimesAreTheMeanOverMicroBatchesAsLargeAsTheFirst) {
  const predict::ChainSample sample = sample_execution(micro_batched_step(), 2, -1);
  const predict::StageSample& s0 = sample.stages[0];
  EXPECT_DOUBLE_EQ(*s0.forward_time, 2e-3) << "micro-batch 2 is smaller: not timed";
  EXPECT_DOUBLE_EQ(*s0.backward_time, 3e-3);
  EXPECT_EQ(*s0.input_bytes, 16);
  EXPECT_EQ(*s0.saved_bytes, 10) << "micro-batch 0's";
  const predict::StageSample& s1 = sample.stages[1];
  EXPECT_DOUBLE_EQ(*s1.forward_time, 6e-3) << "the recomputations, of micro-batch 0's variant only";
  EXPECT_DOUBLE_EQ(*s1.backward_time, 4e-3);
  EXPECT_EQ(s1.variant, 0);
}

TEST(ChainMeasurement, CopyIssueSecondsAreEachStartedCopysComputeTime) {
  ExecutionResult result;
  result.ops = {record(OpKind::FetchWeights, 0, 0, 4e-5),         record(OpKind::ForwardAll, 0, 0, 1e-3),
                record(OpKind::OffloadSaved, 0, 0, 3e-4, 2.5e-4),  // waited on its arrival first
                record(OpKind::ReleaseSaved, 0, 0, 1e-4, 1e-4),   record(OpKind::OffloadGrads, 0, 0, 6e-5),
                record(OpKind::DropWeights, 0, 0, 2e-5)};
  const std::vector<Seconds> issue = copy_issue_seconds(result);
  ASSERT_EQ(issue.size(), 3u);
  EXPECT_DOUBLE_EQ(issue[0], 4e-5);
  EXPECT_NEAR(issue[1], 5e-5, 1e-15);
  EXPECT_DOUBLE_EQ(issue[2], 6e-5);
}

}  // namespace
}  // namespace memtrain::runtime::chain_measurement_test
