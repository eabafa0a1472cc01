// The cache of large freed blocks behind the counted pools.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "runtime/memory/block_cache.h"
#include "runtime/memory/counting_allocator.h"

namespace memtrain::runtime {
namespace {

std::vector<void*> g_released;
void record_release(void* block) { g_released.push_back(block); }

TEST(BlockCache, HandsBackTheSmallestBlockThatHoldsARequestWithinItsSlack) {
  const size_t unit = BlockCache::kSmallest;
  g_released.clear();
  BlockCache cache(8 * unit, &record_release);
  char a[1], b[1], c[1], d[1];
  EXPECT_EQ(cache.take(2 * unit).data, nullptr);
  EXPECT_FALSE(cache.keep(a, unit / 2)) << "small blocks go straight back";
  EXPECT_TRUE(cache.keep(a, unit));
  EXPECT_TRUE(cache.keep(b, unit));
  EXPECT_TRUE(cache.keep(c, 2 * unit));
  EXPECT_TRUE(cache.keep(d, 2 * unit + unit / 8));
  EXPECT_EQ(cache.cached_bytes(), 6 * unit + unit / 8);
  EXPECT_EQ(cache.take(3 * unit).data, nullptr) << "none large enough";
  EXPECT_EQ(cache.take(unit).data, b) << "the last kept of a size first";
  const BlockCache::Block smaller = cache.take(2 * unit - unit / 8);
  EXPECT_EQ(smaller.data, c) << "the smallest that holds the request";
  EXPECT_EQ(smaller.size, 2 * unit);
  EXPECT_EQ(cache.take(unit + unit / 2).data, nullptr) << "d would waste more than its eighth";
  EXPECT_EQ(cache.take(2 * unit).data, d);
  EXPECT_EQ(cache.take(unit).data, a);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  EXPECT_TRUE(g_released.empty()) << "nothing was given up";
}

TEST(BlockCache, ReleasesTheLeastRecentlyKeptBlocksToMakeRoom) {
  const size_t unit = BlockCache::kSmallest;
  g_released.clear();
  BlockCache cache(4 * unit, &record_release);
  char a[1], b[1], c[1], d[1];
  EXPECT_TRUE(cache.keep(a, unit));
  EXPECT_TRUE(cache.keep(b, 2 * unit));
  EXPECT_TRUE(cache.keep(c, unit));
  EXPECT_FALSE(cache.keep(d, 5 * unit)) << "larger than the whole cache";
  EXPECT_TRUE(cache.keep(d, 2 * unit)) << "a and b make room";
  EXPECT_EQ(g_released, (std::vector<void*>{a, b}));
  EXPECT_EQ(cache.cached_bytes(), 3 * unit);
  EXPECT_EQ(cache.take(unit).data, c);
  EXPECT_EQ(cache.take(2 * unit).data, d);
}

TEST(BlockCache, APooledTensorOfTheSameSizeReusesTheFreedMemoryAndIsCountedAgain) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  void* first = nullptr;
  {
    const torch::Tensor t = torch::empty({10 << 20}, torch::kFloat);  // 40 MiB: a block glibc would unmap
    first = t.data_ptr();
  }
  EXPECT_EQ(pool.live(), 0) << "a cached block is not live";
  const torch::Tensor again = torch::empty({10 << 20}, torch::kFloat);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(pool.live(), 40 << 20);
}

#if defined(__GLIBC__)
TEST(BlockCache, AFreedBlockBelowTheCachesSizesStaysInTheProcessHeap) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_"))
    GTEST_SKIP() << "glibc's thresholds set by the environment";
  install_counting_allocator();
  const size_t block = 24 << 20;  // above glibc's default first threshold (128 KiB), below the cache's sizes
  ASSERT_LT(block, BlockCache::kSmallest);
  const size_t mapped_before = mallinfo2().hblkhd;
  { const torch::Tensor t = torch::empty({static_cast<int64_t>(block / 4)}, torch::kFloat); }
  const struct mallinfo2 after = mallinfo2();
  EXPECT_EQ(after.hblkhd, mapped_before) << "the block was mapped on its own, and unmapped when freed";
  EXPECT_GE(after.fordblks, block) << "the freed block is kept in the heap for the next step";
}
#endif

}  // namespace
}  // namespace memtrain::runtime
