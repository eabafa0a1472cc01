#include "predict/all_reduce_model.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace memtrain::predict {
namespace {

TEST(AllReduceModel, RecoversLatencyPerTensorAndBandwidth) {
  const double latency = 0.002, per_tensor = 0.0005, per_byte = 1e-9;
  std::vector<AllReducePoint> points;
  for (Bytes bytes : {Bytes{1} << 18, Bytes{1} << 21, Bytes{1} << 24}) {
    for (std::int64_t tensors : {1, 8, 64}) {
      points.push_back({bytes, tensors, latency + per_tensor * tensors + per_byte * static_cast<double>(bytes)});
    }
  }
  const AllReduceModel m = fit_all_reduce_model(points, 4);
  EXPECT_EQ(m.ranks, 4);
  EXPECT_EQ(m.points, 9);
  EXPECT_NEAR(m.latency, latency, 1e-9);
  EXPECT_NEAR(m.per_tensor, per_tensor, 1e-10);
  EXPECT_NEAR(m.seconds_per_byte, per_byte, 1e-15);
  EXPECT_NEAR(m.bandwidth(), 1e9, 1);
  EXPECT_NEAR(m.r2, 1, 1e-9);
  EXPECT_NEAR(m.seconds(1 << 20, 10), latency + 10 * per_tensor + per_byte * (1 << 20), 1e-12);
}

TEST(AllReduceModel, ATermTheMeasurementsMakeNegativeIsLeftOut) {
  // More tensors came out slightly faster (noise): a per-tensor term would
  // be negative, so the fit keeps latency and bandwidth only.
  const std::vector<AllReducePoint> points = {
      {1 << 20, 1, 0.0030}, {1 << 20, 32, 0.0029}, {1 << 24, 1, 0.0200}, {1 << 24, 32, 0.0195}};
  const AllReduceModel m = fit_all_reduce_model(points, 2);
  EXPECT_EQ(m.per_tensor, 0);
  EXPECT_GT(m.seconds_per_byte, 0);
  EXPECT_GE(m.latency, 0);
  for (const AllReducePoint& p : points) EXPECT_NEAR(m.seconds(static_cast<double>(p.bytes), 1), p.seconds, 0.002);
}

TEST(AllReduceModel, TooFewMeasurementsOrOneSizeAreRefused) {
  EXPECT_THROW(fit_all_reduce_model({{1 << 20, 1, 0.01}, {1 << 21, 1, 0.02}}, 2), Error);
  EXPECT_THROW(fit_all_reduce_model({{1 << 20, 1, 0.01}, {1 << 20, 2, 0.02}, {1 << 20, 4, 0.03}}, 2), Error);
  EXPECT_THROW(fit_all_reduce_model({{1 << 20, 1, 0.0}, {1 << 21, 1, 0.02}, {1 << 22, 1, 0.03}}, 2), Error);
}

}  // namespace
}  // namespace memtrain::predict
