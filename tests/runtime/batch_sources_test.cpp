#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/brown_batches.h"
#include "runtime/fashion_mnist_batches.h"
#include "support/tiny_tagging.h"

namespace memtrain::runtime {
namespace {

TEST(BrownBatches, TensorsCarryIdsTagsAndPadding) {
  data::TokenBatch t;
  t.batch = 2;
  t.length = 3;
  t.words = {5, 6, 0, 7, 8, 9};
  t.tags = {1, 2, -100, 3, 4, 5};
  t.valid = {1, 1, 0, 1, 1, 1};
  const Batch b = BrownBatches::to_tensors(t, torch::kCPU);
  EXPECT_EQ(b.signature.describe(), "2x3");
  EXPECT_EQ(b.signature.size, 6);
  EXPECT_EQ(b.input.scalar_type(), torch::kInt64);
  EXPECT_EQ(b.targets[0][2].item<int64_t>(), -100);
  EXPECT_TRUE(b.key_padding[0][2].item<bool>());
  EXPECT_FALSE(b.key_padding[1][2].item<bool>());
  EXPECT_EQ(b.bytes(), 6 * 8 + 6 * 8 + 6);
}

TEST(BrownBatches, SizesChangeFromStepToStep) {
  BrownBatches source(testing::tiny_tagging(), 8, 1);
  std::set<std::int64_t> sizes;
  for (int i = 0; i < 10; ++i) sizes.insert(source.next(torch::kCPU).signature.size);
  EXPECT_GT(sizes.size(), 3u);
  EXPECT_GE(source.largest(torch::kCPU).signature.size, *sizes.rbegin());
}

TEST(FashionMnistBatches, ResizesToTheBatchScaleAndNormalises) {
  data::ImageBatch b;
  b.batch = 2;
  b.scale = 40;
  b.rows = b.cols = 28;
  b.pixels.assign(2 * 28 * 28, 73);
  b.labels = {4, 9};
  const Batch t = FashionMnistBatches::to_tensors(b, torch::kCPU);
  EXPECT_EQ(t.input.sizes(), (std::vector<int64_t>{2, 1, 40, 40}));
  EXPECT_EQ(t.signature.size, 2 * 40 * 40);
  EXPECT_NEAR(t.input.mean().item<double>(), (73 / 255.0 - 0.2860) / 0.3530, 1e-4);
  EXPECT_EQ(t.targets[1].item<int64_t>(), 9);
}

}  // namespace
}  // namespace memtrain::runtime
