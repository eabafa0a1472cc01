#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "plan/weight_swap_schedules.h"
#include "sim/simulator.h"
#include "support/schedule_text.h"
#include "support/simulator_refusals.h"

namespace memtrain::sim {
namespace {

using testing::parse_schedule;

// Two stages of 100 weight bytes each (grads 100, Adam state 200 more),
// activations of 10, forward 1 s, backward 2 s; the link moves 100 bytes/s.
Chain two_stages() {
  Chain c;
  for (int i = 0; i < 2; ++i) {
    Stage s;
    s.name = "s" + std::to_string(i);
    s.forward_time = 1;
    s.backward_time = 2;
    s.input_bytes = 10;
    s.saved_bytes = 10;
    s.param_bytes = 100;
    s.state_bytes = 300;
    s.grad_bytes = 100;
    s.update_time = 0.5;
    c.stages.push_back(s);
  }
  c.weights_on_host = true;
  c.device_to_host_bandwidth = c.host_to_device_bandwidth = 100;
  return c;
}

TEST(WeightSwapSimulation, PricesFetchesGradientsAndHostUpdatesWorkedOutByHand) {
  const Chain c = two_stages();
  // Both stages' weights come in (1 s each, one after the other), the
  // forward of s0 waits for its copy, ...
  const Schedule s = parse_schedule("Win0 Win1 Fall0 Fall1 L B1 Gout1 B0 Gout0 Wout1 Wout0 U1 U0");
  const SimResult r = simulate(c, s, true);
  // Fall0 waits until t=1 for Win0, runs to 2; Fall1 waits for Win1 (ends 2), runs to 3;
  // B1 3..5 allocates 100 grad bytes; Gout1 copies 5..6; B0 5..7; Gout0 7..8;
  // Wout1 waits nothing (6 < 7); Wout0 waits until 8; U1 on the host 8..8.5, U0 8.5..9.
  EXPECT_DOUBLE_EQ(r.ops[2].end_time, 2);
  EXPECT_DOUBLE_EQ(r.ops[3].end_time, 3);
  EXPECT_DOUBLE_EQ(r.ops[9].end_time, 7);   // Wout1: its gradients left at 6
  EXPECT_DOUBLE_EQ(r.ops[10].end_time, 8);  // Wout0 waits for Gout0
  EXPECT_DOUBLE_EQ(r.time, 9);
  EXPECT_DOUBLE_EQ(r.update_seconds, 1);
  EXPECT_EQ(r.copies.weight_bytes, 400);  // two stages in, two gradients out
  EXPECT_EQ(r.copies.bytes(), 400);
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 2);        // 1 s for Win0, 1 s for Gout0 at Wout0
  EXPECT_DOUBLE_EQ(r.copies.to_host_seconds, 2);        // Gout1 and Gout0
  EXPECT_DOUBLE_EQ(r.copies.to_host_stall_seconds, 1);  // Gout0 at Wout0
  // Peak at B0: batch 10, weights 200, s0's saved 10, s1's gradients 100,
  // delta_1 10, then s0's new gradients 100 and delta_0 10.
  EXPECT_EQ(r.ops[1].after_bytes, 210);
  EXPECT_EQ(r.peak_bytes, 10 + 200 + 10 + 100 + 10 + 100 + 10);
  EXPECT_EQ(r.ops.back().after_bytes, 10) << "only delta_0 stays: weights and gradients have gone";
}

// A CPU build runs the updates on the compute thread: each waits for its
// gradients and compute waits for it.
TEST(WeightSwapSimulation, InlineUpdatesHoldUpComputeWorkedOutByHand) {
  Chain c = two_stages();
  c.updates_inline = true;
  // U1 moved before B0: on the host it would run beside B0; inline it
  // waits for Gout1 (ends 6) and delays B0 by its 0.5 s.
  const SimResult r = simulate(c, parse_schedule("Win0 Win1 Fall0 Fall1 L B1 Gout1 U1 B0 Gout0 Wout1 Wout0 U0"), true);
  // B1 3..5, Gout1 5..6; U1 waits until 6, runs to 6.5; B0 6.5..8.5; Gout0 8.5..9.5;
  // Wout0 waits until 9.5; U0 9.5..10.
  EXPECT_DOUBLE_EQ(r.ops[7].end_time, 6.5);
  EXPECT_DOUBLE_EQ(r.ops[8].end_time, 8.5);
  EXPECT_DOUBLE_EQ(r.time, 10);
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 1 + 1 + 1);  // Win0, U1 for Gout1, Wout0 for Gout0
  // Each way 2 s of copies: the gradients' wholly waited for, the weights' half.
  EXPECT_DOUBLE_EQ(r.copies.hidden_fraction(CopyDirection::ToHost), 0);
  EXPECT_DOUBLE_EQ(r.copies.hidden_fraction(CopyDirection::ToDevice), 0.5);
  EXPECT_NEAR(r.copies.hidden_fraction(), 1 - 3.0 / 4, 1e-12);
  EXPECT_DOUBLE_EQ(r.update_seconds, 1);
  c.updates_inline = false;
  // On the host: U1 runs 6..6.5 beside B0 (5..7); U0 after Gout0 (7..8): 8..8.5.
  EXPECT_DOUBLE_EQ(simulate(c, parse_schedule("Win0 Win1 Fall0 Fall1 L B1 Gout1 U1 B0 Gout0 Wout1 Wout0 U0")).time,
                   8.5);
}

TEST(WeightSwapSimulation, MicroBatchesAccumulateIntoOneGradient) {
  const Chain c = two_stages();
  const Schedule s =
      parse_schedule("Win0 Win1 Fall0 Fall1 L B1 B0 Fall0@1 Fall1@1 L@1 B1@1 B0@1 Gout0 Gout1 Wout0 Wout1 U0 U1");
  const SimResult r = simulate(c, s);
  EXPECT_EQ(r.copies.weight_bytes, 400) << "one gradient per stage, whatever the micro-batches";
  EXPECT_EQ(s.micro_batches(), 2);
  EXPECT_EQ(s.recomputed_forwards(2), 0);
}

TEST(WeightSwapSimulation, RejectsWhatTheExecutorCouldNotRun) {
  const Chain c = two_stages();
  auto rejects = [&](const std::string& text, const std::string& why) { testing::expect_refused(c, text, why); };
  rejects("Fall0 Win1 Fall1 L B1 B0", "weights are in host memory; fetch them first");
  rejects("Win0 Win1 Fall0 Fall1 L B1 B0 Wout0 Wout1", "gradients are on the device only");
  rejects("Win0 Win1 Fall0 Fall1 L B1 Gout1 B0 Gout0 Wout0 Wout1 U0", "gradients of stage 1 never reach the optimizer");
  rejects("Win0 Win1 Fall0 Fall1 L B1 Gout1 B0 Gout0 Wout0 U0 U1", "ends with the weights of stage 1 on the device");
  rejects("Win0 Win1 Fall0 Fall1 L B1 Gout1 Wout1 U1 Win1", "already updated");
  Chain device = c;
  device.weights_on_host = false;
  testing::expect_refused(device, "Win0 Fall0", "weights_on_host is false");
}

TEST(WeightSwapSimulation, GroupingMovesEachWeightAFewTimesWhereThePerLayerBaselineMovesItPerMicroBatch) {
  Chain c = two_stages();
  for (int i = 0; i < 4; ++i) c.stages.push_back(c.stages[0]);  // six stages
  const int n = c.size(), m = 8;
  const SimResult naive = simulate(c, plan::per_layer_swap_schedule(n, m, true));
  // Per micro-batch every stage's weights come in twice (the last stage's
  // once: its backward follows its forward) and its gradient goes out once;
  // the gradient comes back for every micro-batch after the first.
  EXPECT_EQ(naive.copies.weight_bytes, 100 * (m * (2 * n - 1) + m * n + (m - 1) * n));
  EXPECT_EQ(naive.copies.to_host_bytes, 100 * m * n);
  EXPECT_EQ(naive.copies.to_device_bytes, 100 * (m * (2 * n - 1) + (m - 1) * n));
  for (int packs : {1, 2, 3}) {
    const std::vector<int> starts = plan::balanced_pack_starts(c, packs);
    ASSERT_EQ(static_cast<int>(starts.size()), packs);
    const SimResult grouped = simulate(c, plan::grouped_swap_schedule(n, m, starts, true));
    // In for the forward, in again for the backward except the last pack, gradients out once.
    const int last_pack = n - starts.back();
    EXPECT_EQ(grouped.copies.weight_bytes, 100 * (n + (n - last_pack) + n)) << packs << " packs";
    EXPECT_EQ(grouped.copies.to_host_bytes, 100 * n) << packs << " packs: each gradient out once";
    EXPECT_EQ(grouped.copies.to_device_bytes, 100 * (n + (n - last_pack))) << packs << " packs";
    EXPECT_LT(grouped.time, naive.time);
  }
}

TEST(WeightSwapSimulation, OffloadingPackInputsHoldsFewerMicroBatchCheckpointsForTheSameWeightTraffic) {
  Chain c = two_stages();
  for (int i = 0; i < 4; ++i) c.stages.push_back(c.stages[0]);  // six stages
  const int n = c.size(), m = 8;
  const std::vector<int> starts = {0, 1, 2, 3, 4, 5};
  const SimResult kept = simulate(c, plan::grouped_swap_schedule(n, m, starts, true));
  const SimResult offloaded = simulate(c, plan::grouped_swap_schedule(n, m, starts, true, true));
  EXPECT_EQ(offloaded.copies.weight_bytes, kept.copies.weight_bytes);
  // The inputs of packs 1..4 (10 bytes; the last pack keeps no checkpoint)
  // go out and back once per micro-batch.
  EXPECT_EQ(offloaded.copies.bytes() - offloaded.copies.weight_bytes, 2 * 4 * m * 10);
  EXPECT_EQ(offloaded.copies.to_host_bytes, kept.copies.to_host_bytes + 4 * m * 10);
  EXPECT_EQ(offloaded.copies.to_device_bytes, kept.copies.to_device_bytes + 4 * m * 10);
  EXPECT_EQ(kept.copies.bytes(), kept.copies.weight_bytes);
  // Kept: after the forward every pack holds all 8 micro-batches' inputs;
  // offloaded: at most two per pack at a time.
  EXPECT_LE(offloaded.peak_bytes + 4 * (m - 2) * 10, kept.peak_bytes);
  // Every copy (0.1 s) hides under a one-second forward or recomputation:
  // the last micro-batch's release waits for the next pack's first forward,
  // and the first one's prefetch comes during the next pack's last backward.
  EXPECT_DOUBLE_EQ(offloaded.time, kept.time);
  EXPECT_EQ(offloaded.copies.stall_seconds(), kept.copies.stall_seconds());
  // Every shape is a valid schedule: one micro-batch (its release and
  // prefetch fall in the same micro-batch) up to several, any packs.
  for (int micro = 1; micro <= 3; ++micro) {
    for (int packs = 1; packs <= n; ++packs) {
      for (bool lookahead : {false, true}) {
        const std::vector<int> cut = plan::balanced_pack_starts(c, packs);
        const SimResult a = simulate(c, plan::grouped_swap_schedule(n, micro, cut, lookahead, true));
        const SimResult b = simulate(c, plan::grouped_swap_schedule(n, micro, cut, lookahead, false));
        EXPECT_EQ(a.copies.weight_bytes, b.copies.weight_bytes) << micro << " micro-batches, " << packs << " packs";
        // The inputs of packs 1..packs-2 (the last pack keeps none), out and back.
        EXPECT_EQ(a.copies.bytes() - a.copies.weight_bytes, 2 * std::max(0, packs - 2) * micro * 10)
            << micro << " micro-batches, " << packs << " packs";
      }
    }
  }
}

}  // namespace
}  // namespace memtrain::sim
