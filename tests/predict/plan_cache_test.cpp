#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/plan_cache.h"

namespace memtrain::predict {
namespace {

TEST(PlanCache, RoundsSizesUpToTheirBucket) {
  PlanCache c(100);
  EXPECT_EQ(c.bucket_of(1), 1);
  EXPECT_EQ(c.bucket_of(100), 1);
  EXPECT_EQ(c.bucket_of(101), 2);
  EXPECT_EQ(c.planning_size(101), 200);
  EXPECT_GE(c.planning_size(200), 200);
}

TEST(PlanCache, HitsWithinABucketAndCounts) {
  PlanCache c(64);
  EXPECT_EQ(c.find(100), nullptr);
  Plan p;
  p.planner = "mimose";
  p.peak_bytes = 42;
  c.store(100, p);
  const Plan* hit = c.find(120);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->peak_bytes, 42);
  EXPECT_EQ(c.find(129), nullptr);
  EXPECT_EQ(c.hits(), 1);
  EXPECT_EQ(c.misses(), 2);
}

TEST(PlanCache, BadPlansAreForgottenAndMakeTheBucketStricter) {
  PlanCache c(10);
  c.store(15, Plan{});
  EXPECT_EQ(c.strictness(15), 0);
  c.mark_bad(11);
  EXPECT_EQ(c.find(15), nullptr);
  EXPECT_EQ(c.strictness(19), 1);
  c.mark_bad(20);
  EXPECT_EQ(c.strictness(20), 2);
  EXPECT_EQ(c.strictness(21), 0);
}

TEST(PlanCache, RejectsAnEmptyBucket) { EXPECT_THROW(PlanCache(0), UsageError); }

}  // namespace
}  // namespace memtrain::predict
