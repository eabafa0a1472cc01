#include <gtest/gtest.h>

#include "plan/mimose_planner.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "plan/sqrt_planner.h"
#include "plan/static_planner.h"
#include "sim/simulator.h"
#include "support/chains.h"
#include "support/schedule_class.h"

namespace memtrain::plan {
namespace {

using testing::keep_all_peak;
using testing::random_chain;

TEST(SqrtPlanner, CutsCeilSqrtSegmentsOfNearlyEqualLength) {
  EXPECT_EQ(SqrtPlanner::segment_starts(1), (std::vector<int>{0}));
  EXPECT_EQ(SqrtPlanner::segment_starts(9), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(SqrtPlanner::segment_starts(10), (std::vector<int>{0, 3, 6, 8}));
  EXPECT_EQ(SqrtPlanner::segment_starts(24), (std::vector<int>{0, 5, 10, 15, 20}));
}

TEST(SqrtPlanner, KeepsOnlySegmentInputsInTheForwardPass) {
  const Schedule s = schedule_with_segments(5, {0, 2, 4});
  EXPECT_EQ(s.to_string(), "Fck0 Fn1 Fck2 Fn3 Fall4 L B4 Fall2 Fall3 B3 B2 Fall0 Fall1 B1 B0");
}

TEST(Planners, EverySchedulePricesAndFitsWhenFeasible) {
  for (std::uint32_t seed = 1; seed <= 200; ++seed) {
    const Chain c = random_chain(1 + seed % 24, seed);
    const Bytes top = keep_all_peak(c);
    for (const std::string& name : device_weight_planner_names()) {
      for (double fraction : {0.3, 0.5, 0.7, 1.0}) {
        auto planner = make_planner(name);
        const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(top));
        const Plan p = planner->plan({c, budget});
        const sim::SimResult r = sim::simulate(c, p.schedule);  // never throws: a valid schedule
        EXPECT_EQ(r.peak_bytes, p.peak_bytes);
        EXPECT_DOUBLE_EQ(r.time, p.time);
        if (p.feasible) {
          EXPECT_LE(p.peak_bytes, budget) << name << " seed " << seed;
        } else {
          EXPECT_GT(p.min_budget_bytes, budget) << name << " seed " << seed;
          EXPECT_NE(p.note.find("infeasible, minimum needed is " + std::to_string(p.min_budget_bytes) + " bytes"),
                    std::string::npos);
        }
      }
    }
  }
}

TEST(MimosePlanner, RecomputesNothingWhenEverythingFits) {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    const Chain c = random_chain(2 + seed % 20, seed);
    MimosePlanner m;
    const Plan p = m.plan({c, keep_all_peak(c)});
    ASSERT_TRUE(p.feasible);
    EXPECT_EQ(p.schedule.recomputed_forwards(c.size()), 0);
  }
}

TEST(MimosePlanner, IsFeasibleWheneverCheckpointingEverythingIs) {
  for (std::uint32_t seed = 1; seed <= 200; ++seed) {
    const Chain c = random_chain(2 + seed % 20, seed);
    const Bytes all = sim::simulate(c, schedule_with_recompute(std::vector<char>(c.size(), 1))).peak_bytes;
    const Bytes none = keep_all_peak(c);
    for (double t : {0.0, 0.25, 0.5, 0.75}) {
      const Bytes budget = all + static_cast<Bytes>(t * static_cast<double>(std::max<Bytes>(0, none - all)));
      MimosePlanner m;
      EXPECT_TRUE(m.plan({c, budget}).feasible) << "seed " << seed << " t " << t;
    }
  }
}

TEST(MimosePlanner, PicksTheSmallestStageThatCoversTheDeficit) {
  // Four body stages saving 1000, 3000, 5000 and 8000 bytes, one loss stage.
  Chain c;
  const Bytes saves[] = {1000, 3000, 5000, 8000};
  for (int i = 0; i < 4; ++i) {
    Stage s;
    s.input_bytes = 100;
    s.saved_bytes = 100 + saves[i];
    c.stages.push_back(s);
  }
  Stage loss;
  loss.input_bytes = 100;
  loss.saved_bytes = 4;
  c.stages.push_back(loss);
  c.output_bytes = 4;
  const Bytes top = keep_all_peak(c);
  MimosePlanner m;
  // A deficit of 2500 bytes: stage 1 (3000) covers it and is the smallest that does.
  const Plan p = m.plan({c, top - 2500});
  ASSERT_TRUE(p.feasible);
  EXPECT_EQ(p.schedule.to_string().rfind("Fall0 Fck1 Fall2 Fall3 Fall4 L", 0), 0u) << p.schedule.to_string();
  // A deficit larger than any single saving takes the largest first (stage 3).
  const Plan q = m.plan({c, top - 9000});
  ASSERT_TRUE(q.feasible);
  EXPECT_NE(q.schedule.to_string().find("Fck3"), std::string::npos) << q.schedule.to_string();
}

TEST(StaticPlanner, PlansOnceForTheLargestInputAndReusesIt) {
  const Chain large = random_chain(12, 3);
  Chain small = large;
  for (Stage& s : small.stages) {
    s.saved_bytes /= 4;
    s.input_bytes /= 4;
  }
  const Bytes budget = keep_all_peak(large) / 2;
  StaticPlanner st;
  const Plan for_small = st.plan({small, budget, &large});
  MimosePlanner m;
  const Plan mimose_large = m.plan({large, budget});
  ASSERT_TRUE(mimose_large.feasible);
  // Same checkpoints as Mimose chose for the largest input...
  EXPECT_EQ(for_small.schedule, mimose_large.schedule);
  // ...while Mimose itself would recompute less for the small input.
  EXPECT_LT(m.plan({small, budget}).schedule.recomputed_forwards(12), for_small.schedule.recomputed_forwards(12));
  // And a later call keeps the first decision even with another `largest`.
  EXPECT_EQ(st.plan({small, budget, &small}).schedule, for_small.schedule);
}

TEST(CollectionSchedule, RunsEveryStageWithoutGradFirst) {
  EXPECT_EQ(schedule_for_collection(3).to_string(), "Fck0 Fck1 Fck2 Fall2 L B2 Fall1 B1 Fall0 B0");
}

}  // namespace
}  // namespace memtrain::plan
