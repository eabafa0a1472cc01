#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"
#include "support/schedule_text.h"

namespace memtrain::sim {
namespace {

using testing::hand_chain;

using testing::parse_schedule;

// Worked out by hand from src/plan/MEMORY_MODEL.md: start 100 params + 10 batch.
TEST(Simulator, KeepEverythingByHand) {
  const SimResult r = simulate(hand_chain(), parse_schedule("Fall0 Fall1 L B1 B0"), true);
  ASSERT_EQ(r.ops.size(), 5u);
  EXPECT_EQ(r.ops[0].peak_bytes, 155);  // 110 + s0 40 + tf0 5
  EXPECT_EQ(r.ops[0].after_bytes, 150);
  EXPECT_EQ(r.ops[1].peak_bytes, 177);   // 150 + s1 24 + tf1 3
  EXPECT_EQ(r.ops[2].after_bytes, 178);  // + loss gradient 4
  EXPECT_EQ(r.ops[3].peak_bytes, 199);   // 178 + delta_1 20 + tb1 1
  EXPECT_EQ(r.ops[3].after_bytes, 170);  // x1 lives on inside x̄_0
  EXPECT_EQ(r.ops[4].peak_bytes, 187);   // 170 + delta_0 10 + tb0 7
  EXPECT_EQ(r.ops[4].after_bytes, 110);
  EXPECT_EQ(r.peak_bytes, 199);
  EXPECT_EQ(r.peak_op, 3);
  EXPECT_DOUBLE_EQ(r.time, 4.5);
}

TEST(Simulator, CheckpointingTradesTimeForMemoryByHand) {
  const SimResult r = simulate(hand_chain(), parse_schedule("Fck0 Fall1 L B1 Fall0 B0"), true);
  EXPECT_EQ(r.ops[0].peak_bytes, 136);   // 110 + a1 20 + tn0 6
  EXPECT_EQ(r.ops[3].peak_bytes, 179);   // 158 + 20 + 1
  EXPECT_EQ(r.ops[3].after_bytes, 130);  // x1 was held on its own: freed
  EXPECT_EQ(r.ops[4].peak_bytes, 175);   // recompute: 130 + 40 + 5
  EXPECT_EQ(r.peak_bytes, 187);
  EXPECT_EQ(r.peak_op, 5);
  EXPECT_DOUBLE_EQ(r.time, 5.5);
}

// One rank of a data-parallel step: the sums of the gradient buckets run on
// a network timeline beside compute; the step ends when the last has.
TEST(Simulator, SumsGradientsBesideTheBackwardByHand) {
  Chain c = hand_chain();
  c.reduction.buckets = {{1, 0, 1}, {0, 100, 1}};
  c.reduction.reserve_bytes = 30;
  c.reduction.network = {0.5, 0};
  const SimResult r = simulate(c, parse_schedule("Fall0 Fall1 L B1 AR1 B0 AR0"), true);
  // AR1 at 2.5 ends at 3.0, under B(0) (2.5..4.5); AR0 at 4.5 ends at 5.0, waited for.
  EXPECT_DOUBLE_EQ(r.time, 5.0);
  EXPECT_DOUBLE_EQ(r.reduce.seconds, 1.0);
  EXPECT_DOUBLE_EQ(r.reduce.stall_seconds, 0.5);
  EXPECT_DOUBLE_EQ(r.reduce.hidden_fraction(), 0.5);
  EXPECT_EQ(r.reduce.buckets, 2);
  EXPECT_EQ(r.reduce.bytes, 100);
  // The reserve counts from the first sum: B(0) peaks at 170 + 30 + 10 + 7.
  EXPECT_EQ(r.ops[4].after_bytes, 200);
  EXPECT_EQ(r.ops[5].peak_bytes, 217);
  EXPECT_EQ(r.peak_bytes, 217);
}

TEST(Simulator, AThirdSumWaitsForTheFirst) {
  Chain c = testing::random_chain(3, 11);
  c.reduction.buckets = {{2, 1, 1}, {1, 1, 1}, {0, 1, 1}};
  c.reduction.network = {1000, 0};  // far longer than the backwards
  Chain one = c;
  one.reduction = {};
  const SimResult plain = simulate(one, parse_schedule("Fall0 Fall1 Fall2 L B2 B1 B0"), true);
  const SimResult r = simulate(c, parse_schedule("Fall0 Fall1 Fall2 L B2 AR2 B1 AR1 B0 AR0"), true);
  const Seconds after_b2 = plain.ops[4].end_time;
  // The network runs the three sums back to back from the end of B(2).
  EXPECT_DOUBLE_EQ(r.time, after_b2 + 3000);
  EXPECT_DOUBLE_EQ(r.reduce.seconds, 3000);
  // AR0 waited for the first sum to end, then the step for the last.
  EXPECT_DOUBLE_EQ(r.ops[9].end_time, after_b2 + 1000);
  EXPECT_NEAR(r.reduce.stall_seconds, r.time - plain.time, 1e-12);
}

TEST(Simulator, UpdateCanBeThePeak) {
  Chain c = hand_chain();
  c.update_temp_bytes = 500;
  const SimResult r = simulate(c, parse_schedule("Fall0 Fall1 L B1 B0"));
  EXPECT_EQ(r.peak_bytes, 600);
  EXPECT_EQ(r.peak_op, -1);
}

TEST(Simulator, ForwardNoneDropsItsInput) {
  // Three stages: F_n(1) frees x1 (held on its own since F_ck(0)).
  Chain c = testing::random_chain(3, 7);
  const SimResult kept = simulate(c, parse_schedule("Fck0 Fck1 Fall2 L B2 Fall1 B1 Fall0 B0"), true);
  const SimResult dropped = simulate(c, parse_schedule("Fck0 Fn1 Fall2 L B2 Fck0 Fall1 B1 Fall0 B0"), true);
  EXPECT_EQ(kept.ops[1].after_bytes - dropped.ops[1].after_bytes, c.stages[1].input_bytes);
  EXPECT_GT(dropped.time, kept.time);
}

void expect_rejected(const std::string& schedule, const std::string& fragment) {
  try {
    simulate(hand_chain(), parse_schedule(schedule));
    FAIL() << "accepted " << schedule;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Simulator, RejectsSchedulesTheExecutorCouldNotRun) {
  expect_rejected("B0", "schedule op 0 (backward 0): the stage holds no forward with grad");
  expect_rejected("Fall1", "schedule op 0 (forward_all 1): its input is not stored");
  expect_rejected("Fall0 L", "schedule op 1 (loss): the loss stage has no forward with grad");
  expect_rejected("Fall0 Fall1 L B0", "not delta_1");
  expect_rejected("Fall0 Fall1 L B1", "ends before the backward of stage 0");
  expect_rejected("Fall0 Fall0", "already holds a forward with grad");
  expect_rejected("Fall0 Fck0", "its output is already stored");
  expect_rejected("Fall0 Fall1 L B1 Fall1", "its backward has already run");
  expect_rejected("Fall7", "out of range");
}

TEST(Simulator, AgreesWithBuildersOnRandomChains) {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    const Chain c = testing::random_chain(1 + seed % 12, seed);
    const int n = c.size();
    const SimResult keep = simulate(c, plan::schedule_with_recompute(std::vector<char>(n, 0)));
    const SimResult all = simulate(c, plan::schedule_with_recompute(std::vector<char>(n, 1)));
    const SimResult collect = simulate(c, plan::schedule_for_collection(n));
    // Keeping everything runs each forward once; checkpointing every stage but
    // the loss runs those again.
    EXPECT_DOUBLE_EQ(keep.time, c.forward_time() + c.backward_time());
    EXPECT_NEAR(all.time, keep.time + c.forward_time() - c.stages.back().forward_time, 1e-9);
    EXPECT_NEAR(collect.time, keep.time + c.forward_time(), 1e-9);
    EXPECT_GE(keep.peak_bytes, c.persistent_bytes() + c.activation_bytes(0));
  }
}

}  // namespace
}  // namespace memtrain::sim
