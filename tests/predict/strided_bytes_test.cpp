#include <gtest/gtest.h>

#include "predict/quadratic_model.h"
#include "predict/strided_bytes.h"

namespace memtrain::predict {
namespace {

// A downsampling stage of a ResNet: tensors at stride 16 and at stride 32,
// plus a few per-channel statistics.
double downsampling(std::int64_t side) { return 3000 * pixels(side, 16) + 9000 * pixels(side, 32) + 512; }

TEST(StridedBytes, PixelsRoundSidesUpAsPaddedStridedLayersDo) {
  EXPECT_EQ(pixels(197, 32), 49);  // 7 x 7, where (197/32)^2 is 37.9
  EXPECT_EQ(pixels(192, 32), 36);
  EXPECT_EQ(pixels(197, 1), 197 * 197);
  EXPECT_EQ(pixels(197, kConstant), 1);
  EXPECT_EQ(strides_between(4, 16), (std::vector<Stride>{4, 8, 16}));
  EXPECT_EQ(strides_between(16, 8), (std::vector<Stride>{8, 16})) << "an upsampling stage";
  EXPECT_EQ(strides_between(32, kConstant), (std::vector<Stride>{32, kConstant})) << "a classifier head";
  EXPECT_EQ(strides_between(kConstant, kConstant), (std::vector<Stride>{kConstant}));
  EXPECT_TRUE(strides_between(3, 6).empty());
}

TEST(StridedBytes, FindsTheStrideOneTensorLiesAt) {
  StridedBytes input;
  input.observe(224, 8 * 2048 * 4 * pixels(224, 32));
  EXPECT_TRUE(input.consistent_strides().empty()) << "one side fits any stride";
  input.observe(192, 8 * 2048 * 4 * pixels(192, 32));
  // 224 and 192 are multiples of 32: every stride up to 32 fits them.
  EXPECT_EQ(input.consistent_strides(), (std::vector<Stride>{32, 16, 8, 4, 2, 1}));
  input.observe(197, 8 * 2048 * 4 * pixels(197, 32));
  EXPECT_EQ(input.consistent_strides(), (std::vector<Stride>{32}));

  StridedBytes logits;
  for (std::int64_t side : {160, 197, 224}) logits.observe(side, 8 * 10 * 4);
  EXPECT_EQ(logits.consistent_strides(), (std::vector<Stride>{kConstant}));

  StridedBytes mixed;
  for (std::int64_t side : {160, 197, 224}) mixed.observe(side, downsampling(side));
  EXPECT_TRUE(mixed.consistent_strides().empty()) << "no single stride explains two strides' tensors";
}

TEST(StridedBytes, FitsTheStaircaseThatAQuadraticMisses) {
  StridedBytes by_side;
  QuadraticModel by_size;  // Mimose's model, against batch x side x side
  for (std::int64_t side : {224, 174, 182, 198, 188}) {
    by_side.observe(side, downsampling(side));
    by_size.observe(8.0 * side * side, downsampling(side));
  }
  double worst_quadratic = 0;
  for (std::int64_t side = 174; side <= 224; ++side) {
    const double truth = downsampling(side);
    const std::optional<double> fit = by_side.fit({16, 32}, side);
    ASSERT_TRUE(fit) << side;
    EXPECT_NEAR(*fit, truth, 1e-6 * truth) << side;
    worst_quadratic = std::max(worst_quadratic, std::fabs(by_size.predict(8.0 * side * side) - truth) / truth);
  }
  EXPECT_GT(worst_quadratic, 0.02) << "the quadratic misses the steps between the sides it saw";
}

TEST(StridedBytes, ASideWithTheSameShapesGivesItsOwnBytes) {
  // A library's workspace, chosen by shape: larger on 6 x 6 than on 7 x 7.
  StridedBytes workspace;
  workspace.observe(174, 4698112);
  workspace.observe(197, 2994176);
  workspace.observe(224, 2994176);
  EXPECT_EQ(workspace.fit({32}, 179), 4698112) << "179 and 174 are both 6 x 6 at stride 32";
  EXPECT_EQ(workspace.fit({32}, 221), 2994176);
  workspace.observe(224, 2900000);  // a smaller workspace at a side seen: the larger stays
  EXPECT_EQ(workspace.fit({32}, 221), 2994176);
  const std::optional<double> other = workspace.fit({32}, 160);  // 5 x 5: never seen
  ASSERT_TRUE(other);
  EXPECT_GT(*other, 0);
}

TEST(StridedBytes, SidesThatKeepTwoStridesInRatioDetermineOnlySidesThatDoToo) {
  StridedBytes b;
  b.observe(224, downsampling(224));  // 14 x 14 and 7 x 7
  b.observe(192, downsampling(192));  // 12 x 12 and 6 x 6
  EXPECT_FALSE(b.fit({16}, 200) == std::nullopt);
  // 208: 13 x 13 and 7 x 7, unlike any side seen. Bytes are a mix with
  // weights >= 0, so the largest of the all-at-one-stride fits bounds them.
  const std::optional<double> bound = b.fit({16, 32}, 208);
  ASSERT_TRUE(bound);
  EXPECT_GE(*bound, downsampling(208));
  EXPECT_EQ(*bound, std::max(*b.fit({16}, 208), *b.fit({32}, 208)));
  // 160: 10 x 10 and 5 x 5, the ratio of the sides seen: determined, up
  // to the statistics' 512 bytes, which no stride's pixels describe.
  const std::optional<double> at160 = b.fit({16, 32}, 160);
  ASSERT_TRUE(at160);
  EXPECT_NEAR(*at160, downsampling(160), 512);
}

TEST(StridedBytes, AddsTheLargestShortfallItsFitShowedOnTheSidesSeen) {
  StridedBytes b;
  b.observe(10, 100);
  b.observe(20, 450);  // 50 above the others' line
  b.observe(30, 900);
  const double c = (100.0 * 100 + 400 * 450 + 900 * 900) / (100.0 * 100 + 400 * 400 + 900 * 900);
  const std::optional<double> y = b.fit({1}, 25);
  ASSERT_TRUE(y);
  EXPECT_NEAR(*y, c * 625 + (450 - c * 400), 1e-9);
  EXPECT_FALSE(StridedBytes().fit({1}, 25)) << "nothing seen";
}

}  // namespace
}  // namespace memtrain::predict
