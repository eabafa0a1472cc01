#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "predict/chain_predictor.h"

namespace memtrain::predict {
namespace {

// A synthetic two-stage model whose true costs are known for every size.
Bytes saved_at(std::int64_t x) { return 1000 + 48 * x + x * x / 32; }
Bytes input_at(std::int64_t x) { return 8 * x; }

ChainSample sample_at(std::int64_t x, bool with_nograd = true) {
  ChainSample s;
  s.stages.resize(2);
  for (int i = 0; i < 2; ++i) {
    StageSample& st = s.stages[i];
    st.input_bytes = input_at(x);
    st.saved_bytes = saved_at(x) * (i + 1);
    st.forward_temp_bytes = 4 * x;
    if (with_nograd) st.nograd_forward_temp_bytes = 6 * x;
    st.backward_temp_bytes = 512;
    st.forward_time = 1e-6 * static_cast<double>(x);
    st.backward_time = 2e-6 * static_cast<double>(x);
  }
  s.output_bytes = 4;
  s.update_temp_bytes = 4096;
  return s;
}

ChainPredictor make(double margin = 0.1) { return ChainPredictor({{"body", 100, 300}, {"loss", 10, 30}}, margin); }

TEST(ChainPredictor, PredictsUnseenSizesInsideTheObservedRange) {
  ChainPredictor p = make();
  for (std::int64_t x : {320, 3200, 960, 1920}) p.observe(x, sample_at(x));
  ASSERT_TRUE(p.ready());
  const Chain c = p.predict(1504);
  EXPECT_NEAR(static_cast<double>(c.stages[0].saved_bytes), static_cast<double>(saved_at(1504)), 1.0);
  EXPECT_NEAR(static_cast<double>(c.stages[1].saved_bytes), static_cast<double>(2 * saved_at(1504)), 1.0);
  EXPECT_EQ(c.stages[0].input_bytes, input_at(1504));
  EXPECT_EQ(c.stages[0].backward_temp_bytes, 512);
  EXPECT_EQ(c.stages[0].param_bytes, 100);
  EXPECT_EQ(c.stages[1].state_bytes, 30);
  EXPECT_EQ(c.update_temp_bytes, 4096);
  EXPECT_EQ(c.stages[0].name, "body");
  EXPECT_NEAR(c.stages[0].forward_time, 1504e-6, 1e-9);
  EXPECT_LT(p.memory_fit_error(), 1e-6);
}

TEST(ChainPredictor, AddsTheMarginOutsideTheObservedRange) {
  ChainPredictor p = make(0.25);
  for (std::int64_t x : {320, 960, 1920}) p.observe(x, sample_at(x));
  EXPECT_TRUE(p.in_range(1000));
  EXPECT_FALSE(p.in_range(4000));
  const Chain c = p.predict(4000);
  EXPECT_NEAR(static_cast<double>(c.stages[0].saved_bytes), 1.25 * static_cast<double>(saved_at(4000)), 2.0);
  EXPECT_EQ(c.stages[0].param_bytes, 100) << "fixed costs get no margin";
}

TEST(ChainPredictor, NeverPredictsLessThanTheNearestSizeInProportionOutsideTheRange) {
  // Byte counts that stand still between two close sizes (strides rounding
  // tensor sides) make the free quadratic bend to 0 at smaller sizes.
  ChainPredictor p = make(0.25);
  for (std::int64_t x : {313632, 390728, 401408}) {
    ChainSample s = sample_at(x);
    s.stages[0].saved_bytes = x < 390000 ? 48830 : 61250;
    p.observe(x, s);
  }
  const Chain small = p.predict(204800);
  EXPECT_GE(small.stages[0].saved_bytes, static_cast<Bytes>(1.25 * 48830.0 * 204800 / 313632))
      << "the smallest size's bytes in proportion, and the margin";
  EXPECT_NEAR(static_cast<double>(p.predict(400000).stages[0].input_bytes), static_cast<double>(input_at(400000)), 1.0)
      << "inside the range, the fit as it is";
}

TEST(ChainPredictor, IsReadyOnlyWhenEveryFieldWasMeasured) {
  ChainPredictor p = make();
  EXPECT_FALSE(p.ready());
  p.observe(320, sample_at(320, /*with_nograd=*/false));
  EXPECT_FALSE(p.ready());
  p.observe(640, sample_at(640));
  EXPECT_TRUE(p.ready());
}

TEST(ChainSample, TwoMeasurementsOfOneInputKeepTheLargerBytesAndTheFirstTimes) {
  ChainSample fp32 = sample_at(640), bf16 = sample_at(640, /*with_nograd=*/false);
  bf16.stages[0].saved_bytes = *fp32.stages[0].saved_bytes / 2;     // half-size activations
  bf16.stages[1].saved_bytes = *fp32.stages[1].saved_bytes + 4096;  // and weights' copies kept
  bf16.stages[1].backward_temp_bytes = 100;
  bf16.stages[0].forward_time = 1.0;
  bf16.output_bytes = 8;
  const ChainSample both = larger_of(fp32, bf16);
  EXPECT_EQ(both.stages[0].saved_bytes, fp32.stages[0].saved_bytes);
  EXPECT_EQ(both.stages[1].saved_bytes, *fp32.stages[1].saved_bytes + 4096);
  EXPECT_EQ(both.stages[1].backward_temp_bytes, 512);
  EXPECT_EQ(both.stages[0].nograd_forward_temp_bytes, fp32.stages[0].nograd_forward_temp_bytes);  // only one has it
  EXPECT_EQ(both.stages[0].forward_time, fp32.stages[0].forward_time);
  EXPECT_EQ(both.output_bytes, 8);
  // A stage measured as another variant lends nothing of what varies by variant.
  bf16.stages[1].variant = 1;
  EXPECT_EQ(larger_of(fp32, bf16).stages[1].saved_bytes, fp32.stages[1].saved_bytes);
}

TEST(ChainPredictor, RejectsSamplesOfAnotherModel) {
  ChainPredictor p = make();
  ChainSample s = sample_at(100);
  s.stages.pop_back();
  EXPECT_THROW(p.observe(100, s), Error);
}

}  // namespace
}  // namespace memtrain::predict

namespace memtrain::predict {
namespace {

// A stage with one variant: what a variant round of collection measures.
ChainSample variant_sample_at(std::int64_t x, double time_factor) {
  ChainSample s = sample_at(x);
  s.stages[0].variant = 1;
  s.stages[0].saved_bytes = saved_at(x) / 2;
  s.stages[0].forward_time = time_factor * 1e-6 * static_cast<double>(x);
  s.stages[0].backward_time = time_factor * 2e-6 * static_cast<double>(x);
  return s;
}

TEST(ChainPredictor, LearnsEachVariantOnItsOwnAndShowsItOnceMeasured) {
  for (bool recompute : {false, true}) {
    ChainPredictor p({{"body", 100, 300, {"lean"}, recompute}, {"loss", 10, 30}}, 0.1);
    for (std::int64_t x : {320, 3200, 960}) p.observe(x, sample_at(x));
    EXPECT_EQ(p.predict(1000).stages[0].variant_count(), 1) << "not measured yet, not offered";
    // Measured faster than the plain stage (noise, for a variant that recomputes).
    for (std::int64_t x : {320, 3200, 960}) p.observe(x, variant_sample_at(x, 0.5));
    const Chain c = p.predict(1000);
    ASSERT_EQ(c.stages[0].variant_count(), 2);
    const StageVariant lean = c.stages[0].variant(1);
    EXPECT_NEAR(static_cast<double>(lean.saved_bytes), static_cast<double>(saved_at(1000) / 2), 2);
    EXPECT_NEAR(static_cast<double>(c.stages[0].saved_bytes), static_cast<double>(saved_at(1000)), 2)
        << "the plain fields learn only from plain runs";
    const double plain = c.stages[0].forward_time + c.stages[0].backward_time;
    const double variant = lean.forward_time + lean.backward_time;
    if (recompute)
      EXPECT_NEAR(variant, plain, 1e-12) << "a recomputing variant is never predicted faster";
    else
      EXPECT_NEAR(variant, 0.5 * plain, 1e-9);
  }
}

// A four-stage image model on 8 x 1 x S x S inputs: a stem from stride 1
// to 4, a block at stride 4, a downsampling block from 4 to 8, a head from
// stride 8 to logits.
// Bytes per stage at each stride, as padded strided layers give them.
std::int64_t px(std::int64_t side, std::int64_t stride) {
  const std::int64_t n = (side + stride - 1) / stride;
  return 8 * n * n;
}
ChainSample image_sample_at(std::int64_t side) {
  ChainSample s;
  s.stages.resize(4);
  const std::int64_t in[4] = {4 * px(side, 1), 256 * px(side, 4), 256 * px(side, 4), 512 * px(side, 8)};
  const std::int64_t saved[4] = {768 * px(side, 2) + 256 * px(side, 4), 1024 * px(side, 4),
                                 512 * px(side, 4) + 2048 * px(side, 8), 8 * 512 * 4 + 8 * 10 * 4};
  for (int i = 0; i < 4; ++i) {
    StageSample& st = s.stages[i];
    st.input_bytes = in[i];
    st.saved_bytes = saved[i];
    st.forward_temp_bytes = saved[i] / 2;
    st.nograd_forward_temp_bytes = saved[i] / 4;
    st.backward_temp_bytes = saved[i];
    st.forward_time = st.backward_time = 1e-9 * static_cast<double>(side * side);
  }
  s.output_bytes = 8 * 10 * 4;
  s.update_temp_bytes = 4096;
  return s;
}
std::int64_t image_size(std::int64_t side) { return 8 * side * side; }
std::vector<std::int64_t> image_shape(std::int64_t side) { return {8, 1, side, side}; }
ChainPredictor make_image_predictor() {
  return ChainPredictor({{"stem", 0, 0}, {"block", 0, 0}, {"down", 0, 0}, {"head", 0, 0}}, 0.1);
}

TEST(ChainPredictor, PredictsImageStagesExactlyAtEverySideBetweenThoseSeen) {
  ChainPredictor p = make_image_predictor();
  for (std::int64_t side : {224, 175, 182, 198, 188}) {
    p.observe(image_size(side), image_sample_at(side), image_shape(side));
  }
  ASSERT_TRUE(p.ready());
  for (std::int64_t side = 176; side < 224; ++side) {
    const ChainSample truth = image_sample_at(side);
    const Chain c = p.predict(image_size(side));
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(c.stages[i].input_bytes, *truth.stages[i].input_bytes) << "stage " << i << " side " << side;
      EXPECT_EQ(c.stages[i].saved_bytes, *truth.stages[i].saved_bytes) << "stage " << i << " side " << side;
      EXPECT_EQ(c.stages[i].backward_temp_bytes, *truth.stages[i].backward_temp_bytes) << i << " " << side;
    }
  }
}

TEST(ChainPredictor, TakesTheLargerPredictionWhereTheSidesSeenCannotTellStridesApart) {
  // Even sides only: the image's bytes fit stride 1 and stride 2 alike.
  ChainPredictor p = make_image_predictor();
  for (std::int64_t side : {224, 174, 182, 198, 188}) {
    p.observe(image_size(side), image_sample_at(side), image_shape(side));
  }
  for (std::int64_t side = 175; side < 224; ++side) {
    const Bytes truth = *image_sample_at(side).stages[0].input_bytes;
    const Bytes predicted = p.predict(image_size(side)).stages[0].input_bytes;
    if (side % 2 == 0) EXPECT_EQ(predicted, truth) << side;
    if (side % 2 == 1) EXPECT_EQ(predicted, 4 * px(side + 1, 1)) << side << ": as if stride 2";
  }
}

TEST(ChainPredictor, ModelsByImageSideOnlyWhileEveryInputHadItsShape) {
  // The same observations, one of them without its shape: the quadratic in
  // size misses the stride-8 tensors' steps between the sides seen.
  ChainPredictor p = make_image_predictor();
  for (std::int64_t side : {224, 174, 182, 198}) {
    p.observe(image_size(side), image_sample_at(side), image_shape(side));
  }
  p.observe(image_size(188), image_sample_at(188));
  double worst = 0;
  for (std::int64_t side = 175; side < 224; ++side) {
    const double truth = static_cast<double>(*image_sample_at(side).stages[2].saved_bytes);
    worst = std::max(worst,
                     std::fabs(static_cast<double>(p.predict(image_size(side)).stages[2].saved_bytes) - truth) / truth);
  }
  EXPECT_GT(worst, 1e-3);
  ChainPredictor q = make_image_predictor();
  EXPECT_THROW(q.observe(image_size(224) + 1, image_sample_at(224), image_shape(224)), Error);
}

}  // namespace
}  // namespace memtrain::predict
