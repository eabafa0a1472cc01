#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "data/augment.h"
#include "support/packed_images.h"

namespace memtrain::data {
namespace {

using testing::gradient;

float normalised(std::uint8_t p, const AugmentOptions& o) { return (p / 255.0f - o.mean) / o.stddev; }

TEST(Augment, CropBoxesStayInsideTheImageWithTheirAreaAndRatioInRange) {
  const AugmentOptions o;
  SeededRandom rng(3);
  int whole = 0;
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = random_crop_box(224, 160, o, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_LE(b.x + b.width, 224);
    ASSERT_LE(b.y + b.height, 160);
    if (b.width == 224 && b.height == 160) {
      ++whole;  // the fallback after ten misses
      continue;
    }
    const double area = static_cast<double>(b.width * b.height) / (224.0 * 160.0);
    EXPECT_GE(area, o.min_area * 0.93) << b.width << "x" << b.height;
    EXPECT_LE(area, o.max_area * 1.07);
    const double ratio = static_cast<double>(b.width) / static_cast<double>(b.height);
    EXPECT_GE(ratio, o.min_ratio * 0.9);
    EXPECT_LE(ratio, o.max_ratio * 1.1);
  }
  EXPECT_LT(whole, 100) << "most draws fit";
}

TEST(Augment, TheWholeImageAtItsOwnSideIsOnlyNormalisedAndAFlipMirrorsIt) {
  const AugmentOptions o;
  const GrayImage g = gradient(20, 20);
  const std::vector<float> plain = crop_resize_normalise(g, {0, 0, 20, 20}, 20, false, o);
  const std::vector<float> flipped = crop_resize_normalise(g, {0, 0, 20, 20}, 20, true, o);
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < 20; ++x) {
      EXPECT_NEAR(plain[y * 20 + x], normalised(g.pixels[y * 20 + x], o), 1e-5);
      EXPECT_EQ(flipped[y * 20 + (19 - x)], plain[y * 20 + x]);
    }
  }
}

TEST(Augment, ACropAtItsOwnSizeIsThatPartOfTheImage) {
  const AugmentOptions o;
  const GrayImage g = gradient(30, 24);
  const CropBox box{11, 5, 13, 13};
  const std::vector<float> crop = crop_resize_normalise(g, box, 13, false, o);
  for (int y = 0; y < 13; ++y) {
    for (int x = 0; x < 13; ++x) {
      EXPECT_NEAR(crop[y * 13 + x], normalised(g.pixels[(y + 5) * 30 + (x + 11)], o), 1e-5) << x << "," << y;
    }
  }
}

TEST(Augment, UpscalingAConstantCropKeepsItConstantAndTheSameSeedTheSameDraw) {
  AugmentOptions o;
  GrayImage flat;
  flat.width = flat.height = 16;
  flat.pixels.assign(256, 200);
  SeededRandom a(9), b(9);
  const std::vector<float> x = augment_image(flat, 57, o, a);
  ASSERT_EQ(x.size(), 57u * 57u);
  for (float v : x) EXPECT_NEAR(v, normalised(200, o), 1e-5);
  const GrayImage g = gradient(40, 40);
  SeededRandom c(11), d(11), e(12);
  EXPECT_EQ(augment_image(g, 33, o, c), augment_image(g, 33, o, d));
  SeededRandom f(11);
  EXPECT_NE(augment_image(g, 33, o, f), augment_image(g, 33, o, e));
}

TEST(Augment, RefusesOptionsAndBoxesOutOfRange) {
  AugmentOptions o;
  o.min_area = 0;
  EXPECT_THROW(check_augment_options(o), UsageError);
  o = {};
  o.min_ratio = 2;
  o.max_ratio = 1;
  EXPECT_THROW(check_augment_options(o), UsageError);
  o = {};
  o.flip_probability = 1.5;
  EXPECT_THROW(check_augment_options(o), UsageError);
  const GrayImage g = gradient(10, 10);
  EXPECT_THROW(crop_resize_normalise(g, {5, 5, 6, 5}, 8, false, AugmentOptions{}), UsageError);
  EXPECT_THROW(crop_resize_normalise(g, {0, 0, 10, 10}, 0, false, AugmentOptions{}), UsageError);
}

}  // namespace
}  // namespace memtrain::data
