// The exact dynamic program with offload as a third option (PersistentDp
// with offloads, `swap`'s exact candidate): the Simulator reproduces its
// value, it is the optimum of its class, and it is never worse than
// recompute-only.
#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/optimal_planner.h"
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
using testing::with_link;

// Random chains' activations are 100..1000 bytes and forwards 0.1..10 s:
// these links make a copy anywhere from far shorter than a stage to longer.
constexpr double kLinks[] = {30, 300, 3000};

int offloads_in(const Schedule& s) {
  int k = 0;
  for (const Op& op : s.ops) k += op.kind == OpKind::Offload;
  return k;
}

TEST(OptimalOffload, SimulatorReproducesTheTableValueAndTheBudgetHolds) {
  int feasible = 0, offloading = 0;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    for (double link : kLinks) {
      const Chain c = with_link(random_chain(2 + seed % 20, seed), link);
      const Bytes top = keep_all_peak(c);
      for (const PlannerOptions& options : {PlannerOptions{}, PlannerOptions{37, 0}, exact_slots()}) {
        if (options.slot_bytes == 1 && c.size() > 10) continue;  // keeps the exact table small
        OptimalPlanner planner(options, false, true);
        for (double fraction : {0.25, 0.4, 0.55, 0.7, 0.85}) {
          const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(top));
          const Plan p = planner.plan({c, budget});
          if (!p.feasible) {
            EXPECT_GT(p.min_budget_bytes, budget);
            continue;
          }
          ++feasible;
          offloading += offloads_in(p.schedule) > 0;
          const sim::SimResult r = sim::simulate(c, p.schedule);
          EXPECT_LE(r.peak_bytes, budget) << "seed " << seed << " fraction " << fraction;
          EXPECT_TRUE(same_time(r.time, planner.last_value())) << "seed " << seed << " link " << link << ": simulated "
                                                               << r.time << ", table " << planner.last_value() << "\n"
                                                               << p.schedule.to_string();
        }
      }
    }
  }
  EXPECT_GT(feasible, 500);
  EXPECT_GT(offloading, 100);  // the new branch is exercised, not only recomputation
}

TEST(OptimalOffload, WithOneByteSlotsItIsTheOptimumOfEveryScheduleInItsClass) {
  int compared = 0, offloading = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const int n = 2 + seed % 5;
    const Chain c = with_link(random_chain(n, 1000 + seed), kLinks[seed % 3]);
    std::vector<Schedule> all;
    enumerate_persistent_schedules(0, n - 1, n, all, true);
    OptimalPlanner planner(exact_slots(), false, true);
    for (const Plan& p : expect_fastest_of_class(planner, c, all, "seed " + std::to_string(seed))) {
      ++compared;
      offloading += offloads_in(p.schedule) > 0;
    }
  }
  EXPECT_GT(compared, 150);
  EXPECT_GT(offloading, 10);
}

// Faster at the same budget, not feasible at lower ones: the least-memory
// schedule of the class holds only the batch x_0, which never moves, and
// the checkpoint in use.
TEST(OptimalOffload, NeverSlowerThanRecomputeOnly) {
  int faster = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    for (double link : kLinks) {
      const Chain c = with_link(random_chain(4 + seed % 16, 500 + seed), link);
      const Bytes top = keep_all_peak(c);
      OptimalPlanner optimal, offload({}, false, true);
      for (double fraction : {0.2, 0.3, 0.45, 0.6, 0.8}) {
        const Bytes budget = static_cast<Bytes>(fraction * static_cast<double>(top));
        const Plan o = optimal.plan({c, budget});
        const Plan p = offload.plan({c, budget});
        if (o.feasible) {
          ASSERT_TRUE(p.feasible) << "seed " << seed;
          EXPECT_LE(p.time, o.time * (1 + 1e-12)) << "seed " << seed << " link " << link;
          faster += p.time < o.time * 0.999;
        } else if (!p.feasible) {
          EXPECT_LE(p.min_budget_bytes, o.min_budget_bytes) << "seed " << seed;
        }
      }
    }
  }
  EXPECT_GT(faster, 20);
}

TEST(OptimalOffload, IsOptimalWithoutAHostLinkAndRefusesVariantsBeside) {
  const Chain c = random_chain(12, 9);
  const Bytes budget = keep_all_peak(c) / 2;
  OptimalPlanner optimal, offload({}, false, true);
  EXPECT_EQ(offload.plan({c, budget}).schedule, optimal.plan({c, budget}).schedule);
  PersistentDp dp;
  try {
    dp.solve(with_link(c, 100), 1, 1000, true, true);
    FAIL() << "expected a refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("offloads and operator variants"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dp.solve(c, 1, 1000, false, true), UsageError);  // no link
}

}  // namespace
}  // namespace memtrain::plan
