#include <gtest/gtest.h>

#include "plan/offload_insertion.h"
#include "plan/optimal_planner.h"
#include "plan/schedule_builders.h"
#include "plan/swap_planner.h"
#include "sim/simulator.h"
#include "support/chains.h"

namespace memtrain::plan {
namespace {

using testing::random_chain;

Chain with_link(Chain c, double bytes_per_second) {
  c.device_to_host_bandwidth = c.host_to_device_bandwidth = bytes_per_second;
  return c;
}

int count(const Schedule& s, OpKind kind) {
  int k = 0;
  for (const Op& op : s.ops) k += op.kind == kind;
  return k;
}

TEST(HiddenOffloads, FreeMemoryAndCostNothingWhenCopiesAreFast) {
  int offloaded = 0;
  for (std::uint32_t seed = 0; seed < 40; ++seed) {
    const Chain c = with_link(random_chain(4 + seed % 12, seed), 1e9);
    const Schedule checkpointed = schedule_checkpointing_everything(c.size());
    const Schedule s = with_hidden_offloads(c, checkpointed);
    const sim::SimResult before = sim::simulate(c, checkpointed), after = sim::simulate(c, s);
    EXPECT_LE(after.peak_bytes, before.peak_bytes) << s.to_string();
    EXPECT_NEAR(after.time, before.time, 1e-6) << s.to_string();
    EXPECT_EQ(count(s, OpKind::Offload), count(s, OpKind::Prefetch));
    offloaded += count(s, OpKind::Offload);
  }
  EXPECT_GT(offloaded, 40) << "checkpoints idle between forward and backward should be offloaded";
}

TEST(HiddenOffloads, MoveWhatForwardsKeepWhenCopiesAreFast) {
  int offloaded = 0, lower = 0;
  for (std::uint32_t seed = 0; seed < 40; ++seed) {
    const Chain c = with_link(random_chain(4 + seed % 12, seed), 1e9);
    const Schedule kept = schedule_keeping_everything(c.size());
    const Schedule s = with_hidden_offloads(c, kept);
    const sim::SimResult before = sim::simulate(c, kept), after = sim::simulate(c, s);
    EXPECT_LE(after.peak_bytes, before.peak_bytes) << s.to_string();
    EXPECT_NEAR(after.time, before.time, 1e-6) << s.to_string();
    EXPECT_DOUBLE_EQ(after.stall_seconds, 0) << s.to_string();
    EXPECT_EQ(count(s, OpKind::OffloadSaved), count(s, OpKind::PrefetchSaved));
    EXPECT_EQ(count(s, OpKind::OffloadSaved), count(s, OpKind::ReleaseSaved));
    offloaded += count(s, OpKind::OffloadSaved);
    lower += after.peak_bytes < before.peak_bytes;
  }
  EXPECT_GT(offloaded, 80) << "what early forwards keep is idle until their backward";
  EXPECT_GT(lower, 20);
}

TEST(HiddenOffloads, QueueCopiesOnBusyEnginesWithoutStallingCompute) {
  // Copies about as long as the compute: some hide, queued one after another,
  // the rest stay on the device; none makes compute wait.
  int some = 0;
  for (std::uint32_t seed = 0; seed < 40; ++seed) {
    Chain c = random_chain(6 + seed % 10, 300 + seed);
    const Schedule kept = schedule_keeping_everything(c.size());
    const sim::SimResult plain = sim::simulate(c, kept);
    Bytes moved = 0;
    for (int i = 0; i < c.size(); ++i) moved += c.saved_beyond_output(i);
    c = with_link(c, static_cast<double>(moved) / (0.5 * plain.time));
    const Schedule s = with_hidden_offloads(c, kept);
    const sim::SimResult r = sim::simulate(c, s);
    EXPECT_NEAR(r.stall_seconds, 0, 1e-9 * plain.time) << "seed " << seed << ": " << s.to_string();
    EXPECT_NEAR(r.time, plain.time, 1e-9 * plain.time);
    some += count(s, OpKind::OffloadSaved) > 0;
  }
  EXPECT_GT(some, 10);
}

TEST(HiddenOffloads, LeaveSchedulesAloneWithoutAHostLink) {
  const Chain c = random_chain(8, 3);
  const Schedule s = schedule_checkpointing_everything(c.size());
  EXPECT_EQ(with_hidden_offloads(c, s), s);
}

TEST(HiddenOffloads, SkipCopiesTheGapCannotHide) {
  // At 1 byte/s no copy hides under seconds of compute.
  const Chain c = with_link(random_chain(10, 5), 1);
  const Schedule s = schedule_checkpointing_everything(c.size());
  EXPECT_EQ(with_hidden_offloads(c, s), s);
}

TEST(SwapPlanner, FitsTheBudgetAndIsNeverSlowerThanOptimal) {
  int faster = 0, moved = 0;
  for (std::uint32_t seed = 0; seed < 30; ++seed) {
    for (double bandwidth : {1e2, 1e3, 1e5}) {
      const Chain c = with_link(random_chain(6 + seed % 10, 100 + seed), bandwidth);
      const Bytes keep = sim::simulate(c, schedule_keeping_everything(c.size())).peak_bytes;
      for (double fraction : {0.4, 0.6, 0.8}) {
        const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(keep));
        OptimalPlanner optimal;
        SwapPlanner swap;
        const Plan o = optimal.plan({c, budget});
        const Plan p = swap.plan({c, budget});
        if (!o.feasible) continue;
        ASSERT_TRUE(p.feasible) << "seed " << seed;
        const sim::SimResult r = sim::simulate(c, p.schedule);
        EXPECT_LE(r.peak_bytes, budget);
        EXPECT_DOUBLE_EQ(r.time, p.time);
        EXPECT_LE(p.time, o.time + 1e-12) << "seed " << seed;
        faster += p.time < o.time * 0.999;
        // Every tensor it moves is needed: without it the step is slower or does not fit.
        for (const Op& off : p.schedule.ops) {
          if (off.kind != OpKind::Offload && off.kind != OpKind::OffloadSaved) continue;
          Schedule fewer;
          for (const Op& op : p.schedule.ops) {
            const bool saved_copy = op.kind == OpKind::OffloadSaved || op.kind == OpKind::ReleaseSaved ||
                                    op.kind == OpKind::PrefetchSaved;
            const bool x_copy = op.kind == OpKind::Offload || op.kind == OpKind::Release || op.kind == OpKind::Prefetch;
            const bool same = op.stage == off.stage && (off.kind == OpKind::OffloadSaved ? saved_copy : x_copy);
            if (!same) fewer.ops.push_back(op);
          }
          const sim::SimResult without = sim::simulate(c, fewer);
          EXPECT_TRUE(without.peak_bytes > budget || without.time > p.time)
              << "seed " << seed << ": moving stage " << off.stage << " is needless in " << p.schedule.to_string();
          ++moved;
        }
      }
    }
  }
  EXPECT_GT(faster, 0) << "offloading should beat recompute-only somewhere";
  EXPECT_GT(moved, 0);
}

TEST(SwapPlanner, IsOptimalWithoutAHostLink) {
  const Chain c = random_chain(12, 9);
  const Bytes keep = sim::simulate(c, schedule_keeping_everything(c.size())).peak_bytes;
  OptimalPlanner optimal;
  SwapPlanner swap;
  EXPECT_EQ(swap.plan({c, keep / 2}).schedule, optimal.plan({c, keep / 2}).schedule);
}

}  // namespace
}  // namespace memtrain::plan
