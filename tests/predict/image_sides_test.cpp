#include <gtest/gtest.h>

#include "predict/image_sides.h"

namespace memtrain::predict {
namespace {

TEST(ImageSides, NamesTheSideOfSquareImagesOfOneBatchAndChannelCount) {
  ImageSides s;
  EXPECT_FALSE(s.holds()) << "no shape seen yet";
  s.observe({8, 3, 224, 224});
  s.observe({8, 3, 197, 197});
  ASSERT_TRUE(s.holds());
  EXPECT_EQ(s.side(8 * 3 * 197 * 197), 197);
  EXPECT_TRUE(s.is_member(8 * 3 * 160 * 160));
  // A plan cache's bucket edge lies between members: the side below it.
  EXPECT_EQ(s.side(8 * 3 * 198 * 198 - 1), 197);
  EXPECT_FALSE(s.is_member(8 * 3 * 198 * 198 - 1));
  EXPECT_EQ(s.side(8 * 3 * 1), 1);
  EXPECT_FALSE(s.side(8 * 3 - 1)) << "below a 1 x 1 image";
  // Large sides, where a double's square root can land one off.
  const std::int64_t big = 600000001;
  EXPECT_EQ(s.side(8 * 3 * big * big), big);
  EXPECT_EQ(s.side(8 * 3 * big * big - 1), big - 1);
}

TEST(ImageSides, AnyOtherShapeEndsTheFamilyForGood) {
  for (const std::vector<std::int64_t>& other : std::vector<std::vector<std::int64_t>>{
           {8, 3, 224, 200}, {4, 3, 224, 224}, {8, 1, 224, 224}, {8, 224}, {8, 3, 16, 16, 16}, {}}) {
    ImageSides s;
    s.observe({8, 3, 224, 224});
    s.observe(other);
    EXPECT_FALSE(s.holds()) << other.size() << " dimensions";
    s.observe({8, 3, 224, 224});
    EXPECT_FALSE(s.holds()) << "and stays ended";
    EXPECT_FALSE(s.side(8 * 3 * 224 * 224));
  }
  ImageSides tokens;
  tokens.observe({32, 57});
  EXPECT_FALSE(tokens.holds());
}

}  // namespace
}  // namespace memtrain::predict
