#include <gtest/gtest.h>

#include "predict/prediction_error.h"

namespace memtrain::predict {
namespace {

TEST(PredictionError, MedianAndMaxOfRelativeErrors) {
  PredictionError e;
  EXPECT_EQ(e.median(), 0);
  e.record(110, 100);  // 10%
  e.record(98, 100);   // 2%
  e.record(100, 100);  // 0%
  EXPECT_NEAR(e.median(), 0.02, 1e-12);
  EXPECT_NEAR(e.max(), 0.10, 1e-12);
  e.record(95, 100);  // 5%: even count, median of 2% and 5%
  EXPECT_NEAR(e.median(), 0.035, 1e-12);
  e.record(5, 0);  // ignored
  EXPECT_EQ(e.count(), 4u);
}

}  // namespace
}  // namespace memtrain::predict
