#include "predict/bytes_envelope.h"

#include <gtest/gtest.h>

namespace memtrain::predict {
namespace {

TEST(BytesEnvelope, PredictsNothingBeforeAMeasurement) {
  BytesEnvelope e;
  EXPECT_TRUE(e.empty());
  EXPECT_FALSE(e.covers(1));
  EXPECT_EQ(e.predict(100), 0);
}

TEST(BytesEnvelope, KeepsTheMostSeenAtASize) {
  BytesEnvelope e;
  e.observe(100, 700);
  e.observe(100, 500);  // a cheaper step at the same size does not lower it
  EXPECT_EQ(e.predict(100), 700);
  e.observe(100, 900);
  EXPECT_EQ(e.predict(100), 900);
}

TEST(BytesEnvelope, KeepsTheLeastSeenAtASizeForTheOptimisticBound) {
  using Bound = BytesEnvelope::Bound;
  BytesEnvelope e;
  e.observe(100, 700);
  e.observe(100, 500);
  e.observe(200, 1100);
  EXPECT_EQ(e.predict(100, Bound::Least), 500);
  EXPECT_EQ(e.predict(100, Bound::Most), 700);
  EXPECT_EQ(e.predict(150, Bound::Least), 800);
  EXPECT_EQ(e.predict(150, Bound::Most), 900);
}

TEST(BytesEnvelope, BytesInEveryStepRaiseTheOptimisticBoundToo) {
  using Bound = BytesEnvelope::Bound;
  BytesEnvelope e;
  e.observe_in_every_step(100, 500);  // the model's own precision
  e.observe_in_every_step(100, 600);  // under autocast: every loop may be one
  EXPECT_EQ(e.predict(100, Bound::Least), 600);
  EXPECT_EQ(e.predict(100, Bound::Most), 600);
  e.observe_in_every_step(200, 900);
  EXPECT_EQ(e.predict(150, Bound::Least), 750);
}

TEST(BytesEnvelope, InterpolatesBetweenSizesAndIsNeverBelowALinearOrConvexTruth) {
  // Logits and their gradients: a constant (a weight's gradient) plus bytes per token.
  auto linear = [](std::int64_t s) { return 1000 + 48 * s; };
  auto convex = [](std::int64_t s) { return 1000 + 3 * s * s; };
  for (auto truth : {+linear, +convex}) {
    BytesEnvelope e;
    for (std::int64_t s : {64, 256, 1024}) e.observe(s, truth(s));
    for (std::int64_t s = 64; s <= 1024; s += 37) EXPECT_GE(e.predict(s), truth(s)) << "size " << s;
    EXPECT_EQ(e.predict(256), truth(256));
  }
}

TEST(BytesEnvelope, BelowTheSmallestSizeTakesItsBytes) {
  BytesEnvelope e;
  e.observe(200, 5000);
  e.observe(400, 9000);
  EXPECT_EQ(e.predict(10), 5000);
}

TEST(BytesEnvelope, AboveTheLargestSizeScalesInProportionAndIsNotCovered) {
  BytesEnvelope e;
  e.observe(100, 1000);
  e.observe(200, 2400);
  EXPECT_TRUE(e.covers(150));
  EXPECT_TRUE(e.covers(200));
  EXPECT_FALSE(e.covers(201));
  EXPECT_EQ(e.predict(300), 3600);
}

TEST(BytesEnvelope, ADecreaseBetweenSizesNeverTakesAPredictionBelowTheSmallerSize) {
  BytesEnvelope e;
  e.observe(100, 3000);
  e.observe(200, 1000);  // noise, or a cheaper step: the envelope stays at or above 3000 in between
  EXPECT_EQ(e.predict(150), 3000);
}

TEST(BytesEnvelope, IsExtendedOnlyAboveItsLargestSize) {
  BytesEnvelope steps, stand_in;
  steps.observe(100, 1000);
  stand_in.observe(50, 9000);   // below the steps' sizes: the steps' own measurement wins
  stand_in.observe(300, 2800);  // above them: it bounds what lies between
  const BytesEnvelope both = steps.extended_by(stand_in);
  EXPECT_EQ(both.predict(50), 1000);
  EXPECT_EQ(both.predict(200), 1900);
  EXPECT_EQ(both.predict(300), 2800);
  EXPECT_TRUE(both.covers(300));
  EXPECT_FALSE(steps.covers(300));
}

TEST(BytesEnvelope, AnExtensionNeverPredictsLessThanTheLargestSizeMeasured) {
  // The steps' loop holds more than the stand-in did (it keeps its output
  // through the backward): above the steps' sizes the stand-in's figure is
  // raised to theirs, never the line from them down to it.
  BytesEnvelope steps, stand_in;
  steps.observe(100, 3000);
  stand_in.observe(200, 2000);
  const BytesEnvelope both = steps.extended_by(stand_in);
  EXPECT_EQ(both.predict(200), 3000);
  EXPECT_EQ(both.predict(150), 3000);
  EXPECT_EQ(both.predict(200, BytesEnvelope::Bound::Least), 3000);
}

}  // namespace
}  // namespace memtrain::predict
