#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "predict/quadratic_model.h"

namespace memtrain::predict {
namespace {

TEST(QuadraticModel, RecoversAnExactQuadratic) {
  // Bytes of an attention stage: linear in tokens plus quadratic in length.
  auto f = [](double x) { return 4096 + 1536 * x + 0.125 * x * x; };
  QuadraticModel m;
  for (double x : {320.0, 1920.0, 640.0, 5760.0, 1280.0}) m.observe(x, f(x));
  for (double x : {32.0, 999.0, 4000.0, 9000.0}) EXPECT_NEAR(m.predict(x), f(x), 1e-6 * f(x)) << x;
  EXPECT_LT(m.rms_residual(), 1e-3);
  EXPECT_EQ(m.distinct_x(), 3);
  EXPECT_EQ(m.count(), 5);
}

TEST(QuadraticModel, TwoSizesGiveALine) {
  QuadraticModel m;
  m.observe(100, 1000);
  m.observe(200, 1800);
  m.observe(100, 1000);
  EXPECT_NEAR(m.predict(300), 2600, 1e-6);
  EXPECT_NEAR(m.predict(150), 1400, 1e-6);
}

TEST(QuadraticModel, OneSizeIsConstantBelowAndProportionalAbove) {
  QuadraticModel m;
  EXPECT_EQ(m.predict(10), 0);
  m.observe(100, 500);
  EXPECT_DOUBLE_EQ(m.predict(50), 500);
  EXPECT_DOUBLE_EQ(m.predict(100), 500);
  EXPECT_DOUBLE_EQ(m.predict(300), 1500);
}

// A ResNet stage's saved bytes at three close image sides: 221 and 224 px
// both pool to 56 x 56, so the bytes stand still between them.
constexpr double kStairX[3] = {313632, 390728, 401408};
constexpr double kStairY[3] = {48.83, 61.25, 61.25};

TEST(QuadraticModel, AQuadraticThroughAStaircaseBendsToNothingBelowIt) {
  QuadraticModel m;
  for (int i = 0; i < 3; ++i) m.observe(kStairX[i], kStairY[i]);
  EXPECT_LT(m.predict(204800), 5) << "the free fit, far under the 31.25 measured there";
  // Growing quantities: no less than the nearest observed size in proportion.
  EXPECT_NEAR(m.predict_growing(204800), 48.83 * 204800 / 313632, 1e-6);
  EXPECT_GT(m.predict_growing(204800), 31.25);
  EXPECT_NEAR(m.predict_growing(600000), std::max(m.predict(600000), 61.25 * 600000 / 401408), 1e-6);
  EXPECT_GE(m.predict_growing(600000), 61.25 * 600000 / 401408 - 1e-6);
  EXPECT_DOUBLE_EQ(m.predict_growing(350000), m.predict(350000)) << "inside the range, the fit";
}

TEST(QuadraticModel, GrowingPredictionsOfAnExactQuadraticAreTheFitOrTheProportionalFloor) {
  auto f = [](double x) { return 4096 + 1536 * x + 0.125 * x * x; };
  QuadraticModel m;
  for (double x : {640.0, 1280.0, 1920.0}) m.observe(x, f(x));
  EXPECT_NEAR(m.predict_growing(4000), f(4000), 1e-6 * f(4000)) << "above: faster than proportional, the fit";
  EXPECT_NEAR(m.predict_growing(32), f(32), 1e-6 * f(32)) << "far below, the intercept keeps the fit above the floor";
  // Just below, a convex growth is under the floor: a little more, never less.
  EXPECT_NEAR(m.predict_growing(320), f(640) / 2, 1e-6 * f(640));
  EXPECT_GT(m.predict_growing(320), f(320));
  EXPECT_LT(m.predict_growing(320), 1.03 * f(320));
}

TEST(QuadraticModel, NoisyDataHasAResidualOfTheNoiseScale) {
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0, 10);
  QuadraticModel m;
  for (int i = 0; i < 400; ++i) {
    const double x = 100 + (i % 40) * 25;
    m.observe(x, 3 * x + noise(rng));
  }
  EXPECT_NEAR(m.rms_residual(), 10, 2);
  EXPECT_NEAR(m.predict(600), 1800, 5);
}

// Schedule times of the small GPT's collection steps at micro-batch sizes
// 118 and 124 (a noisy pair) and of its calibration at 360.
void observe_noisy_times(QuadraticModel& m) {
  m.observe(118, 0.20);
  m.observe(124, 0.15);
  m.observe(360, 0.70);
}

TEST(QuadraticModel, AFreeFitThroughNoisyTimesBendsAndPredictsSmallInputsSlow) {
  QuadraticModel free;
  observe_noisy_times(free);
  EXPECT_GT(free.predict(72), free.predict(118)) << "why times need the constrained fit below";
}

TEST(QuadraticModel, NonnegativeCoefficientsNeverDecreaseWithSize) {
  QuadraticModel m;
  m.require_nonnegative_coefficients();
  observe_noisy_times(m);
  double previous = m.predict(0);
  EXPECT_GE(previous, 0);
  for (double x = 10; x <= 800; x += 10) {
    EXPECT_GE(m.predict(x), previous) << x;
    previous = m.predict(x);
  }
  // Still a least-squares fit: near the points it was given.
  EXPECT_NEAR(m.predict(360), 0.70, 0.05);
  EXPECT_NEAR(m.predict(121), 0.175, 0.05);
}

TEST(QuadraticModel, NonnegativeCoefficientsLeaveAnIncreasingQuadraticAsItIs) {
  auto f = [](double x) { return 0.002 + 1e-4 * x + 3e-7 * x * x; };
  QuadraticModel m;
  m.require_nonnegative_coefficients();
  for (double x : {50.0, 120.0, 360.0, 200.0}) m.observe(x, f(x));
  for (double x : {10.0, 90.0, 500.0}) EXPECT_NEAR(m.predict(x), f(x), 1e-9) << x;
}

}  // namespace
}  // namespace memtrain::predict
