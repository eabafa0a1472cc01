#include <gtest/gtest.h>

#include "predict/link_estimate.h"

namespace memtrain::predict {
namespace {

constexpr Bytes MiB = Bytes{1} << 20;

TEST(LinkEstimate, StartsAtTheGivenRatesAndFollowsTheMedianOfEachDirectionsSteps) {
  LinkEstimate link(10e9, 20e9);
  EXPECT_EQ(link.device_to_host(), 10e9);
  EXPECT_EQ(link.host_to_device(), 20e9);
  // 64 MiB each way at 2, 4 and 100 GB/s-ish: the outlier does not move the median.
  for (double seconds : {0.032, 0.016, 0.00064}) link.observe(64 * MiB, seconds, 32 * MiB, seconds);
  EXPECT_DOUBLE_EQ(link.device_to_host(), 64.0 * MiB / 0.016);
  EXPECT_DOUBLE_EQ(link.host_to_device(), 32.0 * MiB / 0.016);
  EXPECT_EQ(link.device_to_host_steps(), 3);
  link.observe(64 * MiB, 0.008, 0, 0);  // an even count: the mean of the middle two; nothing came back
  EXPECT_DOUBLE_EQ(link.device_to_host(), (64.0 * MiB / 0.016 + 64.0 * MiB / 0.008) / 2);
  EXPECT_DOUBLE_EQ(link.host_to_device(), 32.0 * MiB / 0.016);
  EXPECT_EQ(link.host_to_device_steps(), 3);
}

TEST(LinkEstimate, IgnoresStepsThatMovedTooLittleAndKeepsNoLinkAtNone) {
  LinkEstimate link(10e9, 0);
  link.observe(LinkEstimate::kMinBytes - 1, 1e-6, 64 * MiB, 0.01);
  EXPECT_EQ(link.device_to_host(), 10e9) << "a few small copies time their start-up, not the link";
  EXPECT_EQ(link.host_to_device(), 0) << "no link stays no link";
  link.observe(LinkEstimate::kMinBytes, 0, 0, 0);
  EXPECT_EQ(link.device_to_host(), 10e9) << "no time measured";
}

TEST(LinkEstimate, ForgetsStepsOlderThanItsWindow) {
  LinkEstimate link(1e9, 1e9);
  for (int k = 0; k < LinkEstimate::kWindow; ++k) link.observe(64 * MiB, 0.064, 0, 0);           // ~1 GB/s
  for (int k = 0; k < LinkEstimate::kWindow / 2 + 1; ++k) link.observe(64 * MiB, 0.0064, 0, 0);  // ~10 GB/s
  EXPECT_DOUBLE_EQ(link.device_to_host(), 64.0 * MiB / 0.0064) << "the faster steps are now the majority";
}

}  // namespace
}  // namespace memtrain::predict
