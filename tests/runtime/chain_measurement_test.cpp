// From executed operations to the cost model, on hand-made records.
#include <gtest/gtest.h>

#include "runtime/chain_measurement.h"

namespace memtrain::runtime::chain_measurement_test {
namespace {

OpRecord record(OpKind kind, int stage, int micro, Seconds seconds, Seconds wait = 0) {
  OpRecord r;
  r.op = {kind, stage, 0, micro};
  r.seconds = seconds;
  r.wait_seconds = wait;
  return r;
}

TEST(ChainMeasurement, CopyIssueSecondsAreEachStartedCopysComputeTime) {
  ExecutionResult result;
  result.ops = {record(OpKind::FetchWeights, 0, 0, 4e-5),
                record(OpKind::ForwardAll, 0, 0, 1e-3),
                record(OpKind::OffloadSaved, 0, 0, 3e-4, 2.5e-4),  // waited on its arrival first
                record(OpKind::ReleaseSaved, 0, 0, 1e-4, 1e-4),
                record(OpKind::OffloadGrads, 0, 0, 6e-5),
                record(OpKind::DropWeights, 0, 0, 2e-5)};
  const std::vector<Seconds> issue = copy_issue_seconds(result);
  ASSERT_EQ(issue.size(), 3u);
  EXPECT_DOUBLE_EQ(issue[0], 4e-5);
  EXPECT_NEAR(issue[1], 5e-5, 1e-15);
  EXPECT_DOUBLE_EQ(issue[2], 6e-5);
}

}  // namespace
}  // namespace memtrain::runtime::chain_measurement_test
