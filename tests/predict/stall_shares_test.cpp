#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/stall_shares.h"

namespace memtrain::predict {
namespace {

TEST(StallShares, OrderedEpochsSplitTheColdEpochByDifference) {
  const StallShares s = stall_shares(2, 5, 10);
  EXPECT_DOUBLE_EQ(s.prep, 0.3);
  EXPECT_DOUBLE_EQ(s.fetch, 0.5);
  EXPECT_DOUBLE_EQ(s.order_noise, 0);
}

// The measurement that once gave a prep share of 1.0127: a cached epoch
// slower than the cold one. The shares stay in [0, 1], sum to at most 1,
// and the disorder is reported.
TEST(StallShares, ACachedEpochSlowerThanTheColdOneIsNoiseNotAShareAboveOne) {
  const StallShares s = stall_shares(0.2, 10.5, 10.0);
  EXPECT_DOUBLE_EQ(s.fetch, 0);
  EXPECT_DOUBLE_EQ(s.prep, (10.5 - 0.2) / 10.5);
  EXPECT_LE(s.prep + s.fetch, 1);
  EXPECT_DOUBLE_EQ(s.order_noise, 0.5);
}

TEST(StallShares, ASyntheticEpochSlowerThanTheCachedOneLeavesNoPrepShare) {
  const StallShares s = stall_shares(3, 2.5, 6);
  EXPECT_DOUBLE_EQ(s.prep, 0);
  EXPECT_DOUBLE_EQ(s.fetch, 0.5);
  EXPECT_DOUBLE_EQ(s.order_noise, 0.5);
}

TEST(StallShares, EverySharePairStaysInRangeWhateverTheOrder) {
  const double times[] = {0.5, 1, 2, 3};
  for (double a : times) {
    for (double b : times) {
      for (double c : times) {
        const StallShares s = stall_shares(a, b, c);
        EXPECT_GE(s.prep, 0);
        EXPECT_GE(s.fetch, 0);
        EXPECT_LE(s.prep + s.fetch, 1 + 1e-12) << a << " " << b << " " << c;
        EXPECT_GE(s.order_noise, 0);
      }
    }
  }
}

TEST(StallShares, RefusesATimeThatIsNotPositiveNamingTheEpoch) {
  try {
    stall_shares(1, 0, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the cached epoch took 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::predict
