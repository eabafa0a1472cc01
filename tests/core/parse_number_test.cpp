#include <gtest/gtest.h>

#include "core/parse_number.h"

namespace memtrain {
namespace {

TEST(ParseNumber, TakesOnlyTextThatIsWhollyANumber) {
  EXPECT_EQ(parse_whole_integer("12"), 12);
  EXPECT_EQ(parse_whole_integer("-3"), -3);
  EXPECT_FALSE(parse_whole_integer("12x"));
  EXPECT_FALSE(parse_whole_integer("1.5"));
  EXPECT_FALSE(parse_whole_integer(""));
  EXPECT_FALSE(parse_whole_integer("x"));
  EXPECT_FALSE(parse_whole_integer("99999999999999999999")) << "out of range is not a number either";
  EXPECT_EQ(parse_whole_real("1.5"), 1.5);
  EXPECT_EQ(parse_whole_real("50"), 50.0);
  EXPECT_FALSE(parse_whole_real("50%"));
  EXPECT_FALSE(parse_whole_real(""));
}

}  // namespace
}  // namespace memtrain
