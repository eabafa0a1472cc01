// Planning for stages whose weights are present only around their own runs
// (blocks sharded by FSDP2): every stage recomputed right before its own
// backward, never on the way to a later one's.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/optimal_planner.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"
#include "support/schedule_class.h"

namespace memtrain::plan {
namespace {

using testing::exact_slots;
using testing::keep_all_peak;
using testing::random_chain;
using testing::same_time;

TEST(LocalRecompute, TellsAStageRecomputedForItsOwnBackwardFromOneRecomputedForALaterOne) {
  EXPECT_TRUE(schedule_keeping_everything(5).recomputes_locally());
  EXPECT_TRUE(schedule_with_recompute({1, 0, 1, 1, 0}).recomputes_locally());
  EXPECT_TRUE(schedule_checkpointing_everything(5).recomputes_locally());
  EXPECT_TRUE(schedule_for_collection(5).recomputes_locally());
  // Stages 0..2 as one segment: 0 and 1 run again on the way to 2's backward.
  EXPECT_FALSE(schedule_with_segments(5, {0, 3}).recomputes_locally());
  Schedule twice;  // stage 0 forward twice before the loss
  twice.forward_none(0);
  twice.forward_all(0);
  twice.forward_all(1);
  twice.loss();
  twice.backward(1);
  twice.backward(0);
  EXPECT_FALSE(twice.recomputes_locally());
}

TEST(LocalRecompute, RecomputingOneMoreStageLeavesWhatRanBeforeItsForward) {
  const Schedule kept = schedule_with_recompute({1, 0, 0, 1, 0});
  const Schedule more = recomputing_stage(kept, 2);
  EXPECT_EQ(more, schedule_with_recompute({1, 0, 1, 1, 0}));
  EXPECT_TRUE(more.recomputes_locally());
  // Everything up to stage 2's forward (Fck0 Fall1) is as it was.
  EXPECT_TRUE(std::equal(kept.ops.begin(), kept.ops.begin() + 2, more.ops.begin()));
  // A variant of the stage's forward with grad moves with it to before its backward.
  Schedule lean;
  lean.forward_all(0, /*variant=*/2);
  lean.forward_all(1);
  lean.loss();
  lean.backward(1);
  lean.backward(0);
  const Schedule recomputed = recomputing_stage(lean, 0);
  EXPECT_EQ(recomputed.to_string(), "Fck0 Fall1 L B1 Fall0.v2 B0");
}

PlannerOptions local(PlannerOptions options) {
  options.local_recompute = true;
  return options;
}

TEST(LocalRecompute, OptimalPlansOnlyLocalSchedulesThatHoldTheBudgetAndBeatMimose) {
  int feasible = 0, recomputing = 0, restricted = 0, compared = 0;
  for (std::uint32_t seed = 1; seed <= 80; ++seed) {
    const Chain c = random_chain(2 + seed % 12, 5000 + seed);
    const Bytes top = keep_all_peak(c);
    OptimalPlanner planner(local(exact_slots()));
    OptimalPlanner unrestricted(exact_slots());
    ASSERT_TRUE(planner.recomputes_locally());
    for (double fraction : {0.3, 0.45, 0.6, 0.75, 0.9}) {
      const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(top));
      const Plan p = planner.plan({c, budget});
      const Plan free = unrestricted.plan({c, budget});
      restricted += free.feasible && !free.schedule.recomputes_locally();
      const Plan mimose = make_planner("mimose")->plan({c, budget, &c});
      if (mimose.feasible && mimose.peak_bytes <= budget) {
        ASSERT_TRUE(p.feasible) << "mimose fits seed " << seed << " at " << fraction;
        EXPECT_LE(p.time, mimose.time + 1e-9) << "seed " << seed << " fraction " << fraction;
        ++compared;
      }
      if (!p.feasible) {
        EXPECT_GT(p.min_budget_bytes, budget);
        continue;
      }
      ++feasible;
      recomputing += p.schedule.recomputed_forwards(c.size()) > 0;
      EXPECT_TRUE(p.schedule.recomputes_locally()) << "seed " << seed << ": " << p.schedule.to_string();
      const sim::SimResult r = sim::simulate(c, p.schedule);
      EXPECT_LE(r.peak_bytes, budget) << "seed " << seed << " fraction " << fraction;
      EXPECT_TRUE(same_time(r.time, planner.last_value())) << "seed " << seed;
      if (free.feasible) EXPECT_GE(p.time, free.time - 1e-9) << "a restriction cannot be faster";
    }
  }
  EXPECT_GT(feasible, 150);
  EXPECT_GT(recomputing, 80);
  EXPECT_GT(restricted, 10);  // the restriction changes what optimal would plan
  EXPECT_GT(compared, 100);
}

TEST(LocalRecompute, PlannersSayWhetherTheyRecomputeLocally) {
  PlannerOptions options;
  options.local_recompute = true;
  for (const char* name : {"mimose", "all", "none", "static", "optimal", "joint"}) {
    EXPECT_TRUE(make_planner(name, options)->recomputes_locally()) << name;
  }
  for (const char* name : {"sqrt", "swap", "tensile"}) {
    EXPECT_FALSE(make_planner(name, options)->recomputes_locally()) << name;
  }
  EXPECT_FALSE(make_planner("optimal")->recomputes_locally());
}

}  // namespace
}  // namespace memtrain::plan
