#include "predict/rank_scaling.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace memtrain::predict {
namespace {

// t(b) = max(0.4, 0.02 b) - 0.1: flat to batch 20, then linear; one process
// does best at the knee (its throughput falls beyond it, c < 0).
ThroughputModel knee_model() {
  ThroughputModel m;
  m.a = 0.4;
  m.k = 0.02;
  m.c = -0.1;
  return m;
}

RankMachine machine(int ranks, double slowdown, Seconds all_reduce) {
  RankMachine m;
  m.ranks = ranks;
  m.compute_slowdown = slowdown;
  m.all_reduce.latency = all_reduce;
  m.sync_seconds = 0.001;
  return m;
}

TEST(RankScaling, AStepIsTheSlowedComputePlusTheAllReduceAndTheGathers) {
  RankMachine m = machine(4, 1.5, 0.05);
  m.all_reduce.seconds_per_byte = 1e-9;
  m.all_reduce.per_tensor = 1e-4;
  const RankStep s = predict_rank_step(knee_model(), m, 100'000'000, 10, 30);
  EXPECT_NEAR(s.compute, (0.02 * 30 - 0.1) * 1.5, 1e-12);
  EXPECT_NEAR(s.communication, 0.05 + 10 * 1e-4 + 0.1 + 0.001, 1e-12);
  EXPECT_NEAR(s.step, s.compute + s.communication, 1e-12);
  EXPECT_NEAR(s.throughput, 4 * 30 / s.step, 1e-9);
  // One rank communicates nothing.
  EXPECT_EQ(predict_rank_step(knee_model(), machine(1, 1, 0.05), 100, 10, 30).communication, 0);
}

TEST(RankScaling, TheAllReduceMovesTheBestBatchPastTheKnee) {
  // Without communication the knee (batch 20) is best, as for one process.
  EXPECT_EQ(best_rank_step(knee_model(), machine(2, 1, 0), 0, 1, 64).batch, 20);
  // A fixed cost per step that outweighs c pays off with the largest batch.
  EXPECT_EQ(best_rank_step(knee_model(), machine(2, 1, 0.2), 0, 1, 64).batch, 64);
  EXPECT_EQ(best_rank_step(knee_model(), machine(2, 1, 0.2), 0, 1, 7).batch, 7);
  EXPECT_THROW(best_rank_step(knee_model(), machine(2, 1, 0.2), 0, 1, 0), Error);
}

}  // namespace
}  // namespace memtrain::predict
