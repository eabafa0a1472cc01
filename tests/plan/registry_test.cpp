#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/registry.h"

namespace memtrain::plan {
namespace {

TEST(Registry, MakesEveryPlannerByItsName) {
  const std::vector<std::string> names = planner_names();
  EXPECT_EQ(names, (std::vector<std::string>{"all", "joint", "mimose", "none", "optimal", "sqrt", "static", "swap",
                                             "swap-naive", "tensile"}));
  for (const std::string& n : names) EXPECT_EQ(make_planner(n)->name(), n);
  EXPECT_EQ(device_weight_planner_names(), (std::vector<std::string>{"all", "joint", "mimose", "none", "optimal",
                                                                     "sqrt", "static", "swap", "tensile"}));
}

TEST(Registry, UnknownNameListsTheKnownOnes) {
  try {
    make_planner("rotor");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(
        e.what(),
        "unknown planner 'rotor'; known: all, joint, mimose, none, optimal, sqrt, static, swap, swap-naive, tensile");
  }
}

TEST(Registry, OnlyNoneIgnoresTheBudget) {
  for (const std::string& n : planner_names()) EXPECT_EQ(make_planner(n)->respects_budget(), n != "none") << n;
}

}  // namespace
}  // namespace memtrain::plan
