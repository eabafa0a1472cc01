#include <gtest/gtest.h>

#include "core/schedule.h"

namespace memtrain {
namespace {

TEST(Schedule, RendersCompactlyAndCountsRecomputation) {
  Schedule s;
  s.forward_checkpoint(0);
  s.forward_all(1);
  s.loss();
  s.backward(1);
  s.forward_all(0);
  s.backward(0);
  EXPECT_EQ(s.to_string(), "Fck0 Fall1 L B1 Fall0 B0");
  EXPECT_EQ(s.recomputed_forwards(2), 1);
  const auto j = s.to_json();
  ASSERT_EQ(j.size(), 6u);
  EXPECT_EQ(j[0]["op"], "forward_checkpoint");
  EXPECT_EQ(j[2]["op"], "loss");
  EXPECT_FALSE(j[2].contains("stage"));
  EXPECT_EQ(j[5]["stage"], 0);
}

}  // namespace
}  // namespace memtrain
