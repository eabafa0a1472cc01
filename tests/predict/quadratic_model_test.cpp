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

}  // namespace
}  // namespace memtrain::predict
