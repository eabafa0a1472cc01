#include "runtime/comm/tensor_buckets.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

namespace memtrain::runtime {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

std::vector<torch::Tensor> floats(const std::vector<std::int64_t>& counts) {
  std::vector<torch::Tensor> ts;
  for (std::int64_t n : counts) ts.push_back(torch::zeros({n}));
  return ts;
}

TEST(TensorBuckets, ConsecutiveTensorsOfOneTypeFillABucketAndALargeOneTravelsAlone) {
  // 400 B, 400 B, 400 B, 4000 B, 40 B with 1 KiB buckets.
  std::vector<torch::Tensor> ts = floats({100, 100, 100, 1000, 10});
  EXPECT_EQ(tensor_buckets(ts, 1024), (Buckets{{0, 1}, {2}, {3}, {4}}));
  EXPECT_EQ(tensor_buckets(ts, 1200), (Buckets{{0, 1, 2}, {3}, {4}}));
  EXPECT_EQ(tensor_buckets(ts, 0), (Buckets{{0}, {1}, {2}, {3}, {4}}));
  ts[1] = torch::zeros({100}, torch::kDouble);  // another type starts a bucket of its own
  EXPECT_EQ(tensor_buckets(ts, 8192), (Buckets{{0}, {1}, {2, 3, 4}}));
}

TEST(TensorBuckets, TemporaryBytesCountTheCopiesInFlightAndTheOneComingIn) {
  const std::vector<torch::Tensor> ts = floats({100, 100, 100, 1000});
  // Buckets {0,1,2} (a 1200 B copy) and {3} (in place).
  EXPECT_EQ(bucket_temporary_bytes(ts, false, 1200), 4 * 1200);
  EXPECT_EQ(bucket_temporary_bytes(ts, true, 1200), 4000 + 2 * 1200);
  // Every tensor alone: no copy; ordered, the largest coming in.
  EXPECT_EQ(bucket_temporary_bytes(ts, false, 0), 0);
  EXPECT_EQ(bucket_temporary_bytes(ts, true, 0), 4000);
}

TEST(TensorBuckets, AFlatCopyGoesBackIntoItsTensors) {
  std::vector<torch::Tensor> ts{torch::arange(6, torch::kFloat).view({2, 3}), torch::arange(4, torch::kFloat)};
  const std::vector<std::size_t> both{0, 1};
  torch::Tensor flat = flatten_bucket(ts, both);
  ASSERT_EQ(flat.numel(), 10);
  flat.mul_(2);
  unflatten_bucket(flat, ts, both);
  EXPECT_TRUE(torch::equal(ts[0], torch::arange(6, torch::kFloat).view({2, 3}).mul(2)));
  EXPECT_TRUE(torch::equal(ts[1], torch::arange(4, torch::kFloat).mul(2)));
  // A bucket of one tensor is that tensor: nothing to copy.
  EXPECT_TRUE(flatten_bucket(ts, {1}).is_same(ts[1]));
}

}  // namespace
}  // namespace memtrain::runtime
