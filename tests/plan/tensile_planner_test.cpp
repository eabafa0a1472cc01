#include "plan/tensile_planner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "plan/offload_insertion.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"

namespace memtrain::plan {
namespace {

using testing::random_chain;
using testing::with_link;

Bytes moved_bytes(const Chain& c, const Op& offload) {
  return offload.kind == OpKind::OffloadSaved ? c.saved_beyond_output(offload.stage)
                                              : c.activation_bytes(offload.stage);
}

std::vector<Op> offloads(const Schedule& s) {
  std::vector<Op> out;
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::Offload || op.kind == OpKind::OffloadSaved) out.push_back(op);
  }
  return out;
}

Bytes peak(const Chain& c, const Schedule& s) { return sim::simulate(c, s).peak_bytes; }

TEST(TensilePlanner, KeepsEverythingWhenItFits) {
  for (std::uint32_t seed = 1; seed <= 30; ++seed) {
    const Chain c = with_link(random_chain(2 + seed % 12, seed), 1e9);
    const Schedule keep = schedule_keeping_everything(c.size());
    TensilePlanner t;
    const Plan p = t.plan({c, peak(c, keep)});
    ASSERT_TRUE(p.feasible);
    EXPECT_EQ(p.schedule.to_string(), keep.to_string());
  }
}

// Between the peak with every hideable swap and the peak keeping everything,
// swaps alone suffice: nothing is recomputed, and the tensors swapped are
// the largest of those that could be.
TEST(TensilePlanner, SwapsLargestTensorsFirstAndRecomputesOnlyWhenNoSwapFits) {
  int swapped_only = 0;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    const Chain c = with_link(random_chain(3 + seed % 14, seed), 1e9);
    const Schedule keep = schedule_keeping_everything(c.size());
    const Schedule all_swaps = with_hidden_offloads(c, keep);
    const Bytes low = peak(c, all_swaps), high = peak(c, keep);
    if (low >= high) continue;
    const Bytes budget = low + (high - low) / 2;
    TensilePlanner t;
    const Plan p = t.plan({c, budget});
    ASSERT_TRUE(p.feasible) << seed;
    EXPECT_LE(p.peak_bytes, budget);
    EXPECT_EQ(p.schedule.recomputed_forwards(c.size()), 0) << p.schedule.to_string();
    const std::vector<Op> taken = offloads(p.schedule);
    ASSERT_FALSE(taken.empty());
    Bytes smallest_taken = moved_bytes(c, taken[0]);
    for (const Op& op : taken) smallest_taken = std::min(smallest_taken, moved_bytes(c, op));
    for (const Op& op : offloads(all_swaps)) {
      if (std::find(taken.begin(), taken.end(), op) == taken.end()) {
        EXPECT_LE(moved_bytes(c, op), smallest_taken) << "seed " << seed << ": a larger tensor was left";
      }
    }
    ++swapped_only;
    // Below every swap's reach it recomputes.
    const Plan q = t.plan({c, low - 1});
    if (q.feasible) {
      EXPECT_GT(q.schedule.recomputed_forwards(c.size()), 0) << q.schedule.to_string();
    }
  }
  EXPECT_GT(swapped_only, 30);
}

TEST(TensilePlanner, WithoutAHostLinkOnlyRecomputes) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const Chain c = random_chain(3 + seed % 14, seed);
    const Bytes high = peak(c, schedule_keeping_everything(c.size()));
    TensilePlanner t;
    const Plan p = t.plan({c, high - 1});
    EXPECT_TRUE(offloads(p.schedule).empty()) << p.schedule.to_string();
    if (p.feasible) {
      EXPECT_GT(p.schedule.recomputed_forwards(c.size()), 0);
    }
  }
}

TEST(TensilePlanner, ItsLeastBudgetIsFeasible) {
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    const Chain c = with_link(random_chain(2 + seed % 16, seed), seed % 2 ? 1e9 : 50.0);
    TensilePlanner t;
    const Plan p = t.plan({c, 1});
    ASSERT_FALSE(p.feasible);
    const Plan q = t.plan({c, p.min_budget_bytes});
    EXPECT_TRUE(q.feasible) << seed;
    EXPECT_LE(q.peak_bytes, p.min_budget_bytes);
  }
}

}  // namespace
}  // namespace memtrain::plan
