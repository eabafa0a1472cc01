#include "plan/lease_curve.h"

#include <gtest/gtest.h>

#include "plan/frugal_schedule.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"

namespace memtrain::plan {
namespace {

TEST(LeaseCurve, RunsFromTheFrugalPeakToTheFastestPlansAndNeverRises) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const Chain c = testing::random_chain(3 + seed % 12, seed);
    for (const std::string name : {"mimose", "optimal", "tensile"}) {
      auto planner = make_planner(name);
      const Schedule frugal = most_frugal_schedule(*planner, c, &c, schedule_checkpointing_everything(c.size()));
      const LeaseCurve r = lease_curve(*planner, c, &c, frugal, 6);
      EXPECT_EQ(r.least, sim::simulate(c, frugal).peak_bytes) << name;
      EXPECT_GE(r.want, r.least) << name;
      EXPECT_LE(r.want, std::max(r.least, keep_everything_peak(c)));
      ASSERT_FALSE(r.curve.empty());
      ASSERT_LE(r.curve.size(), 6u);
      EXPECT_EQ(r.curve.front().first, r.least);
      EXPECT_EQ(r.curve.back().first, r.want);
      for (size_t k = 1; k < r.curve.size(); ++k) {
        EXPECT_GT(r.curve[k].first, r.curve[k - 1].first) << name;
        EXPECT_LE(r.curve[k].second, r.curve[k - 1].second) << name;
      }
    }
  }
}

TEST(LeaseCurve, APlannerThatIgnoresTheBudgetAsksForItsPlansPeak) {
  const Chain c = testing::random_chain(8, 4);
  auto none = make_planner("none");
  const LeaseCurve r = lease_curve(*none, c, &c, schedule_checkpointing_everything(c.size()), 6);
  const Bytes peak = keep_everything_peak(c);
  EXPECT_EQ(r.least, peak);
  EXPECT_EQ(r.want, peak);
  ASSERT_EQ(r.curve.size(), 1u);
  EXPECT_EQ(r.curve[0].first, peak);
}

}  // namespace
}  // namespace memtrain::plan
