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
using testing::random_chain_with_variants;
using testing::same_time;

// `s` with every choice of variant for each of its F_all operations.
std::vector<Schedule> with_every_variant(const Schedule& s, const Chain& c) {
  std::vector<Schedule> out = {s};
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind != OpKind::ForwardAll) continue;
    std::vector<Schedule> next;
    for (const Schedule& partial : out) {
      for (int v = 0; v < c.stages[s.ops[k].stage].variant_count(); ++v) {
        Schedule t = partial;
        t.ops[k].variant = v;
        next.push_back(t);
      }
    }
    out = std::move(next);
  }
  return out;
}

TEST(Simulator, PricesEachVariantWithItsOwnSizesAndTimes) {
  Chain c = testing::hand_chain();
  c.stages[0].variants.push_back({"lean", 1.5, 3.0, 25, 2, 9});
  Schedule plain = schedule_keeping_everything(2), lean = plain;
  lean.ops[0].variant = 1;
  const sim::SimResult a = sim::simulate(c, plain, true), b = sim::simulate(c, lean, true);
  EXPECT_EQ(a.ops[0].after_bytes - b.ops[0].after_bytes, 40 - 25);  // s_0 of each variant
  EXPECT_DOUBLE_EQ(b.time - a.time, (1.5 - 1) + (3.0 - 2));
  // B(0) frees the variant's own saved bytes and reaches the same end.
  EXPECT_EQ(a.ops.back().after_bytes, b.ops.back().after_bytes);
  Schedule bad = plain;
  bad.ops[0].variant = 2;
  try {
    sim::simulate(c, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("variant 2 does not exist; the stage has variants 0..1"), std::string::npos)
        << e.what();
  }
}

TEST(JointPlanner, WithOneByteSlotsItIsTheOptimumOverSchedulesAndVariants) {
  int compared = 0, used_variant = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const int n = 1 + seed % 5;
    const Chain c = random_chain_with_variants(n, 500 + seed);
    std::vector<Schedule> shapes, all;
    enumerate_persistent_schedules(0, n - 1, n, shapes);
    for (const Schedule& s : shapes) {
      for (Schedule& v : with_every_variant(s, c)) all.push_back(std::move(v));
    }
    OptimalPlanner joint(exact_slots(), true);
    for (const Plan& p : expect_fastest_of_class(joint, c, all, "seed " + std::to_string(seed))) {
      for (const Op& op : p.schedule.ops) used_variant += op.variant != 0;
      ++compared;
    }
  }
  EXPECT_GT(compared, 150);
  EXPECT_GT(used_variant, 20);  // variants are really chosen, not only offered
}

TEST(JointPlanner, NeverWorseThanOptimalAndFitsLowerBudgets) {
  int lower_minimum = 0;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    const Chain c = random_chain_with_variants(2 + seed % 14, 600 + seed);
    const Bytes top = keep_all_peak(c);
    for (const PlannerOptions& options : {exact_slots(), PlannerOptions{}}) {
      OptimalPlanner optimal(options), joint(options, true);
      for (int k = 2; k <= 20; k += 2) {
        const Bytes budget = top * k / 20;
        const Plan o = optimal.plan({c, budget}), j = joint.plan({c, budget});
        if (!o.feasible) continue;
        ASSERT_TRUE(j.feasible) << "seed " << seed << " at " << k << "/20";
        EXPECT_LE(j.time, o.time + 1e-9) << "seed " << seed << " at " << k << "/20";
        EXPECT_LE(sim::simulate(c, j.schedule).peak_bytes, budget);
      }
    }
    OptimalPlanner optimal(exact_slots()), joint(exact_slots(), true);
    const Bytes o_min = optimal.plan({c, 0}).min_budget_bytes, j_min = joint.plan({c, 0}).min_budget_bytes;
    EXPECT_LE(j_min, o_min) << "seed " << seed;
    lower_minimum += j_min < o_min;
  }
  EXPECT_GT(lower_minimum, 20);
}

TEST(JointPlanner, UsesAVariantOnlyWhenItBuysSomething) {
  Chain c = random_chain(8, 42);
  for (Stage& s : c.stages) {  // as fast as the plain stage, keeping less
    s.variants.push_back({"lean", s.forward_time, s.backward_time, s.saved_bytes / 2 + c.output_bytes, 0, 0});
  }
  const Plan ample = make_planner("joint", exact_slots())->plan({c, keep_all_peak(c)});
  ASSERT_TRUE(ample.feasible);
  for (const Op& op : ample.schedule.ops) EXPECT_EQ(op.variant, 0) << ample.schedule.to_string();
  const Plan tight = make_planner("joint", exact_slots())->plan({c, keep_all_peak(c) * 6 / 10});
  ASSERT_TRUE(tight.feasible);
  int variants = 0;
  for (const Op& op : tight.schedule.ops) variants += op.variant != 0;
  EXPECT_GT(variants, 0) << "where memory is short, the lean variant is free time";
}

TEST(JointPlanner, IsOptimalOnAChainWithoutVariants) {
  for (std::uint32_t seed = 1; seed <= 30; ++seed) {
    const Chain c = random_chain(3 + seed % 20, 700 + seed);
    const Bytes budget = keep_all_peak(c) / 2;
    const Plan o = make_planner("optimal")->plan({c, budget}), j = make_planner("joint")->plan({c, budget});
    EXPECT_EQ(o.feasible, j.feasible);
    EXPECT_EQ(o.schedule, j.schedule) << "seed " << seed;
  }
}

}  // namespace
}  // namespace memtrain::plan
