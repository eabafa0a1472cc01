#include <algorithm>

#include <gtest/gtest.h>

#include "data/seeded_order.h"

namespace memtrain::data {
namespace {

TEST(EpochOrder, IsADeterministicPermutationThatChangesPerEpoch) {
  const auto a = epoch_order(1000, 7, 0);
  EXPECT_EQ(a, epoch_order(1000, 7, 0));
  EXPECT_NE(a, epoch_order(1000, 7, 1));
  EXPECT_NE(a, epoch_order(1000, 8, 0));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(SeededRandom, BelowStaysInRangeAndCoversIt) {
  SeededRandom r(3);
  std::vector<int> seen(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const auto v = r.below(7);
    ASSERT_LT(v, 7u);
    ++seen[v];
  }
  for (int c : seen) EXPECT_GT(c, 800);
}

}  // namespace
}  // namespace memtrain::data
