#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/optimal_planner.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"
#include "support/schedule_class.h"

namespace memtrain::plan {
namespace {

using testing::enumerate_persistent_schedules;
using testing::exact_slots;
using testing::expect_fastest_of_class;
using testing::keep_all_peak;
using testing::price_all;
using testing::random_chain;
using testing::same_time;

TEST(OptimalPlanner, SimulatorReproducesTheTableValueAndTheBudgetHolds) {
  int feasible = 0, recomputing = 0;
  for (std::uint32_t seed = 1; seed <= 150; ++seed) {
    const Chain c = random_chain(1 + seed % 30, seed);
    const Bytes top = keep_all_peak(c);
    for (const PlannerOptions& options : {PlannerOptions{}, PlannerOptions{37, 0}, exact_slots()}) {
      if (options.slot_bytes == 1 && c.size() > 12) continue;  // keeps the exact table small
      OptimalPlanner planner(options);
      for (double fraction : {0.25, 0.4, 0.55, 0.7, 0.85, 1.0}) {
        const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(top));
        const Plan p = planner.plan({c, budget});
        if (!p.feasible) {
          EXPECT_GT(p.min_budget_bytes, budget);
          continue;
        }
        ++feasible;
        recomputing += p.schedule.recomputed_forwards(c.size()) > 0;
        const sim::SimResult r = sim::simulate(c, p.schedule);
        EXPECT_LE(r.peak_bytes, budget) << "seed " << seed << " fraction " << fraction;
        EXPECT_TRUE(same_time(r.time, planner.last_value()))
            << "seed " << seed << ": simulated " << r.time << ", table " << planner.last_value();
      }
    }
  }
  EXPECT_GT(feasible, 1000);
  EXPECT_GT(recomputing, 500);  // the interesting case is exercised, not only "everything fits"
}

TEST(OptimalPlanner, WithOneByteSlotsItIsTheOptimumOfEveryScheduleInItsClass) {
  int compared = 0;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    const int n = 1 + seed % 6;
    const Chain c = random_chain(n, 1000 + seed);
    std::vector<Schedule> all;
    enumerate_persistent_schedules(0, n - 1, n, all);
    OptimalPlanner planner(exact_slots());
    compared += static_cast<int>(expect_fastest_of_class(planner, c, all, "seed " + std::to_string(seed)).size());
  }
  EXPECT_GT(compared, 200);
}

TEST(OptimalPlanner, WithOneByteSlotsTheLeastBudgetIsExact) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const Chain c = random_chain(2 + seed % 10, 2000 + seed);
    OptimalPlanner planner(exact_slots());
    const Plan none_fits = planner.plan({c, 0});
    ASSERT_FALSE(none_fits.feasible);
    const Bytes least = none_fits.min_budget_bytes;
    EXPECT_TRUE(planner.plan({c, least}).feasible) << "seed " << seed;
    EXPECT_FALSE(planner.plan({c, least - 1}).feasible) << "seed " << seed;
  }
}

TEST(OptimalPlanner, NeverSlowerThanAnyOtherPlannerWhereThatOneFits) {
  int compared = 0;
  for (std::uint32_t seed = 1; seed <= 80; ++seed) {
    const Chain c = random_chain(2 + seed % 12, 3000 + seed);
    const Bytes top = keep_all_peak(c);
    OptimalPlanner optimal(exact_slots());
    for (double fraction : {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}) {
      const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(top));
      const Plan best = optimal.plan({c, budget});
      for (const char* name : {"none", "all", "sqrt", "mimose", "static"}) {
        const Plan other = make_planner(name)->plan({c, budget, &c});
        if (!other.feasible || other.peak_bytes > budget) continue;
        ASSERT_TRUE(best.feasible) << name << " fits seed " << seed << " at " << fraction << ", optimal does not";
        EXPECT_LE(best.time, other.time + 1e-9) << name << " seed " << seed << " fraction " << fraction;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

// At the default 500 slots the table rounds sizes up, and the planner wins
// the rounding back by letting the Simulator pick among the schedules just
// past the budget: still never slower than a heuristic, on these chains.
TEST(OptimalPlanner, AtDefaultSlotsStillNeverSlowerThanTheHeuristics) {
  int compared = 0;
  for (std::uint32_t seed = 1; seed <= 80; ++seed) {
    const Chain c = random_chain(4 + seed % 30, 4000 + seed);
    const Bytes top = keep_all_peak(c);
    OptimalPlanner optimal;
    for (int k = 2; k <= 20; ++k) {
      const Bytes budget = top * k / 20;
      const Plan best = optimal.plan({c, budget});
      for (const char* name : {"all", "sqrt", "mimose", "static"}) {
        const Plan other = make_planner(name)->plan({c, budget, &c});
        if (!other.feasible) continue;
        ASSERT_TRUE(best.feasible) << name << " fits seed " << seed << " at " << k << "/20, optimal does not";
        EXPECT_LE(best.time, other.time + 1e-9) << name << " seed " << seed << " at " << k << "/20";
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 1500);
}

TEST(OptimalPlanner, FitsWhereverKeepingEverythingFitsEvenAtCoarseSlots) {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    const Chain c = random_chain(24, seed);
    OptimalPlanner planner(PlannerOptions{5, 0});
    const Plan p = planner.plan({c, keep_all_peak(c)});
    ASSERT_TRUE(p.feasible);
    EXPECT_EQ(p.schedule.recomputed_forwards(c.size()), 0);
  }
}

TEST(OptimalPlanner, RecomputesMoreAsTheBudgetShrinks) {
  const Chain c = random_chain(16, 7);
  OptimalPlanner planner(exact_slots());
  const Bytes top = keep_all_peak(c);
  double previous = 0;
  int previous_recomputed = 0;
  for (int k = 10; k >= 1; --k) {
    const Plan p = planner.plan({c, top * k / 10});
    if (!p.feasible) break;
    EXPECT_GE(p.time, previous - 1e-9);  // less memory never buys time
    EXPECT_GE(p.schedule.recomputed_forwards(c.size()), k == 10 ? 0 : 1);
    previous = p.time;
    previous_recomputed = p.schedule.recomputed_forwards(c.size());
  }
  EXPECT_GT(previous_recomputed, 1);
}

TEST(OptimalPlanner, RefusesATableTooLargeNamingWhatToChange) {
  const Chain c = random_chain(30, 3);
  OptimalPlanner planner(exact_slots());
  try {
    planner.plan({c, Bytes{1} << 40});
  } catch (const UsageError& e) {
    // A budget this large fits everything, so the table is not needed at all.
    FAIL() << e.what();
  }
  Chain big = c;
  for (Stage& s : big.stages) s.saved_bytes *= 1000000;
  try {
    planner.plan({big, keep_all_peak(big) / 2});
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("use fewer slots or larger slot bytes"), std::string::npos) << e.what();
  }
}

TEST(OptimalPlanner, RegistryPassesSlotOptionsAndRejectsBadOnes) {
  EXPECT_EQ(make_planner("optimal")->name(), "optimal");
  EXPECT_THROW(make_planner("optimal", PlannerOptions{0, 0}), UsageError);
  EXPECT_THROW(make_planner("optimal", PlannerOptions{500, -1}), UsageError);
  // Fewer slots: coarser rounding, so never a faster plan than finer slots at the same budget.
  const Chain c = random_chain(20, 11);
  const Bytes budget = keep_all_peak(c) / 2;
  const Plan coarse = make_planner("optimal", PlannerOptions{20, 0})->plan({c, budget});
  const Plan fine = make_planner("optimal", exact_slots())->plan({c, budget});
  ASSERT_TRUE(fine.feasible);
  if (coarse.feasible) {
    EXPECT_GE(coarse.time, fine.time - 1e-9);
  }
}

}  // namespace
}  // namespace memtrain::plan
