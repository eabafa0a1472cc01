// The cache of large freed blocks behind the counted pools.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/memory/block_cache.h"
#include "runtime/memory/counting_allocator.h"

namespace memtrain::runtime {
namespace {

TEST(BlockCache, HandsBackABlockOfExactlyTheSizeFreedWithinItsLimit) {
  const size_t mib = BlockCache::kSmallest;
  BlockCache cache(3 * mib);
  char a[1], b[1], c[1];
  EXPECT_EQ(cache.take(2 * mib), nullptr);
  EXPECT_FALSE(cache.keep(a, mib / 2)) << "small blocks go straight back";
  EXPECT_TRUE(cache.keep(a, mib));
  EXPECT_TRUE(cache.keep(b, mib));
  EXPECT_FALSE(cache.keep(c, 2 * mib)) << "over the limit";
  EXPECT_EQ(cache.cached_bytes(), 2 * mib);
  EXPECT_EQ(cache.take(2 * mib), nullptr) << "no other size";
  EXPECT_EQ(cache.take(mib), b) << "the last kept first";
  EXPECT_EQ(cache.take(mib), a);
  EXPECT_EQ(cache.take(mib), nullptr);
  EXPECT_EQ(cache.cached_bytes(), 0u);
}

TEST(BlockCache, APooledTensorOfTheSameSizeReusesTheFreedMemoryAndIsCountedAgain) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  void* first = nullptr;
  {
    const torch::Tensor t = torch::empty({1 << 20}, torch::kFloat);  // 4 MiB
    first = t.data_ptr();
  }
  EXPECT_EQ(pool.live(), 0) << "a cached block is not live";
  const torch::Tensor again = torch::empty({1 << 20}, torch::kFloat);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(pool.live(), 4 << 20);
}

}  // namespace
}  // namespace memtrain::runtime
