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
  for (const std::string& n : planner_names()) EXPECT_EQ(planner_traits(n).respects_budget, n != "none") << n;
}

// The traits a name answers without building a planner are the built
// planner's own, with the options it was built with.
TEST(Registry, TraitsByNameAreTheBuiltPlannersOwn) {
  for (const bool local : {false, true}) {
    PlannerOptions options;
    options.local_recompute = local;
    for (const std::string& n : planner_names()) {
      const PlannerTraits& named = planner_traits(n);
      const auto built = make_planner(n, options);
      EXPECT_EQ(&named, &built->traits()) << n;
      EXPECT_EQ(named.recomputes_locally(options), built->recomputes_locally()) << n << " local " << local;
    }
  }
  EXPECT_TRUE(planner_traits("joint").uses_variants);
  EXPECT_FALSE(planner_traits("optimal").uses_variants);
  EXPECT_TRUE(planner_traits("swap-naive").needs_weights_on_host);
  EXPECT_TRUE(planner_traits("tensile").uses_host_link);
  EXPECT_THROW(planner_traits("rotor"), UsageError);
}

TEST(Registry, WeightsInHostMemoryNeedAPlannerThatPlansThem) {
  EXPECT_NO_THROW(check_weights_placement("swap", true));
  EXPECT_NO_THROW(check_weights_placement("mimose", false));
  try {
    check_weights_placement("mimose", true, "--weights-on host");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "planner mimose cannot plan weights in host memory; with --weights-on host expected one of: swap, "
                 "swap-naive");
  }
  EXPECT_THROW(check_weights_placement("swap-naive", false), UsageError);
}

}  // namespace
}  // namespace memtrain::plan
