#include <gtest/gtest.h>

#include "core/error.h"
#include "core/schedule_interpreter.h"
#include "plan/gradient_sums.h"
#include "support/schedule_text.h"

namespace memtrain::plan {
namespace {

using testing::parse_schedule;

TEST(GradientSums, EachBucketGoesRightAfterTheLastBackwardOfItsLowestStage) {
  EXPECT_EQ(with_gradient_sums(parse_schedule("Fall0 Fall1 Fall2 L B2 B1 B0"), {2, 0}).to_string(),
            "Fall0 Fall1 Fall2 L B2 AR2 B1 B0 AR0");
  // Recomputation and offloads stay where the planner put them.
  EXPECT_EQ(with_gradient_sums(parse_schedule("Fck0 Off1 Fall1 Fall2 L B2 B1 Rel1 Pre1 Fall0 B0"), {1, 0}).to_string(),
            "Fck0 Off1 Fall1 Fall2 L B2 B1 AR1 Rel1 Pre1 Fall0 B0 AR0");
  // Micro-batches: after the last micro-batch's backward.
  const Schedule two = with_gradient_sums(parse_schedule("Fall0 Fall1 L B1 Fall0@1 Fall1@1 L@1 B1@1 B0@1 B0"), {1, 0});
  EXPECT_EQ(two.to_string(), "Fall0 Fall1 L B1 Fall0@1 Fall1@1 L@1 B1@1 AR1 B0@1 B0 AR0");
  ScheduleLimits limits;
  limits.variants = {1, 1};
  limits.reduce_buckets = {1, 0};
  EXPECT_NO_THROW(check_schedule(two, limits));
}

TEST(GradientSums, AtTheEndEverySumFollowsTheWholeSchedule) {
  EXPECT_EQ(with_gradient_sums_at_end(parse_schedule("Fall0 Fall1 Fall2 L B2 B1 B0"), {2, 0}).to_string(),
            "Fall0 Fall1 Fall2 L B2 B1 B0 AR2 AR0");
}

TEST(GradientSums, AScheduleWithoutABucketsBackwardIsRefused) {
  try {
    with_gradient_sums(parse_schedule("Fall0 Fall1 L B1"), {1, 0});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "gradient sums: the schedule never runs the backward of stage 0, whose gradients a bucket sums; "
                 "expected a schedule that runs every backward");
  }
}

}  // namespace
}  // namespace memtrain::plan
