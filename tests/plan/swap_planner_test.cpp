#include <gtest/gtest.h>

#include <algorithm>

#include "plan/offload_insertion.h"
#include "plan/optimal_planner.h"
#include "plan/schedule_builders.h"
#include "plan/swap_planner.h"
#include "sim/simulator.h"
#include "support/chains.h"

namespace memtrain::plan {
namespace {

using testing::random_chain;
using testing::with_link;

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
    EXPECT_DOUBLE_EQ(after.copies.stall_seconds(), 0) << s.to_string();
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
    EXPECT_NEAR(r.copies.stall_seconds(), 0, 1e-9 * plain.time) << "seed " << seed << ": " << s.to_string();
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
      const Bytes keep = keep_everything_peak(c);
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
            const bool saved_copy =
                op.kind == OpKind::OffloadSaved || op.kind == OpKind::ReleaseSaved || op.kind == OpKind::PrefetchSaved;
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

// A GPT-like decoder as calibrated on an H100 (docs/examples/gpt-w1024-l8-
// h100-batch2.json, its blocks made equal): each block keeps for its
// backward a little more than a 25 GiB/s link moves during the next block's
// forward, so only the first blocks' tensors can be on the host by the end of
// the forward, and below the keep-everything peak the fastest schedules
// offload early blocks and recompute late ones.
Chain decoder_like() {
  auto stage = [](const char* name, Bytes saved, Bytes params, double forward, double backward, Bytes backward_temp) {
    Stage s;
    s.name = name;
    s.input_bytes = 1474560;
    s.saved_bytes = saved;
    s.forward_temp_bytes = 12994560;
    s.nograd_forward_temp_bytes = 34093056;
    s.backward_temp_bytes = backward_temp;
    s.forward_time = forward;
    s.backward_time = backward;
    s.param_bytes = s.grad_bytes = params;
    s.state_bytes = 3 * params;
    return s;
  };
  Chain c;
  c.stages.push_back(stage("embed", 1844736, 41697280, 0.31e-3, 0.41e-3, 43780120));
  for (const char* name : {"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7"}) {
    c.stages.push_back(stage(name, 34464256, 50384896, 1.1e-3, 2.1e-3, 22306816));
  }
  c.stages.push_back(stage("head", 15878656, 41008192, 0.42e-3, 1.07e-3, 41942528));
  c.output_bytes = 4;
  c.update_temp_bytes = 40961024;
  c.resident_bytes = 74975512;
  return with_link(c, 25.0 * (1 << 30));
}

// What `swap` did before it tried offloading early stages: optimal's schedule
// at the budget or above, with the hidden offloads added.
double fastest_from_larger_budgets(const Chain& c, Bytes budget, Bytes keep) {
  OptimalPlanner optimal;
  double best = optimal.plan({c, budget}).time;
  for (int k = 0; k <= SwapPlanner::kLargerBudgets; ++k) {
    const Plan p = optimal.plan({c, SwapPlanner::larger_budget(k, budget, keep)});
    if (!p.feasible) continue;
    const Schedule s = without_needless_offloads(c, with_hidden_offloads(c, p.schedule), budget);
    const sim::SimResult r = sim::simulate(c, s);
    if (r.peak_bytes <= budget) best = std::min(best, r.time);
  }
  return best;
}

TEST(SwapPlanner, OffloadsEarlyStagesAndRecomputesLateOnes) {
  const Chain c = decoder_like();
  const Bytes keep = keep_everything_peak(c);
  int better = 0;
  for (int step = 1; step < 40; ++step) {
    const Bytes budget = keep - static_cast<Bytes>(step) * (8 << 20);
    const Plan p = SwapPlanner().plan({c, budget});
    if (!p.feasible) continue;
    const double before = fastest_from_larger_budgets(c, budget, keep);
    EXPECT_LE(p.time, before + 1e-12) << "budget " << budget;
    if (p.time < before * 0.99) {
      ++better;
      EXPECT_GT(count(p.schedule, OpKind::OffloadSaved), 0) << p.schedule.to_string();
      EXPECT_GT(p.schedule.recomputed_forwards(c.size()), 0) << p.schedule.to_string();
      EXPECT_LE(sim::simulate(c, p.schedule).peak_bytes, budget);
    }
  }
  EXPECT_GT(better, 0) << "offloading early blocks and recomputing late ones should beat every larger budget's "
                          "recompute schedule with offloads added somewhere";
}

TEST(SwapPlanner, IsOptimalWithoutAHostLink) {
  const Chain c = random_chain(12, 9);
  const Bytes keep = keep_everything_peak(c);
  OptimalPlanner optimal;
  SwapPlanner swap;
  EXPECT_EQ(swap.plan({c, keep / 2}).schedule, optimal.plan({c, keep / 2}).schedule);
}

}  // namespace
}  // namespace memtrain::plan
