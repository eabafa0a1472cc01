#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"
#include "data/sample_cache.h"
#include "data/seeded_order.h"

namespace memtrain::data {
namespace {

SampleCache::Sample bytes_of(std::int64_t key, size_t size) {
  return std::make_shared<const std::vector<std::uint8_t>>(size, static_cast<std::uint8_t>(key));
}

// Epochs over `n` samples of `size` bytes in a new seeded order each: the
// cache's counters per epoch.
std::vector<CacheCounters> run_epochs(SampleCache& cache, std::int64_t n, size_t size, int epochs) {
  std::vector<CacheCounters> out;
  for (int e = 0; e < epochs; ++e) {
    for (std::int64_t key : epoch_order(n, 7, e)) {
      if (!cache.find(key)) cache.offer(key, bytes_of(key, size));
    }
    out.push_back(cache.take_counters());
  }
  return out;
}

TEST(SampleCache, MinioHitsExactlyTheCachedFractionFromTheSecondEpoch) {
  // A dataset twice the cache: half of it stays, every later epoch hits that half.
  SampleCache cache(500 * 100, CachePolicy::minio);
  const auto epochs = run_epochs(cache, 1000, 100, 4);
  EXPECT_EQ(epochs[0].hits, 0);
  EXPECT_EQ(epochs[0].bytes_missed, 1000 * 100);
  for (int e = 1; e < 4; ++e) {
    EXPECT_EQ(epochs[e].hits, 500) << e;
    EXPECT_EQ(epochs[e].bytes_missed, 500 * 100) << e;
    EXPECT_DOUBLE_EQ(epochs[e].hit_rate(), 0.5);
  }
  EXPECT_EQ(cache.size_bytes(), 500 * 100);
}

TEST(SampleCache, LruThrashesOnARandomOrderLargerThanTheCache) {
  SampleCache lru(500 * 100, CachePolicy::lru);
  const auto epochs = run_epochs(lru, 1000, 100, 4);
  for (int e = 1; e < 4; ++e) {
    // What it keeps is the end of the last epoch, which a new random order
    // wants at random times; half of it is evicted before it is asked for.
    EXPECT_LT(epochs[e].hit_rate(), 0.40) << e;
    EXPECT_GT(epochs[e].hit_rate(), 0.10) << e;
    EXPECT_GT(epochs[e].bytes_missed, 600 * 100) << "at least 20% more storage reads than minio's 500";
  }
  EXPECT_EQ(lru.size_bytes(), 500 * 100);
}

TEST(SampleCache, LruKeepsTheMostRecentlyUsed) {
  SampleCache cache(300, CachePolicy::lru);
  for (std::int64_t k : {1, 2, 3}) cache.offer(k, bytes_of(k, 100));
  ASSERT_TRUE(cache.find(1));        // 1 is now the most recent, 2 the least
  cache.offer(4, bytes_of(4, 100));  // evicts 2
  EXPECT_FALSE(cache.find(2));
  EXPECT_TRUE(cache.find(1));
  EXPECT_TRUE(cache.find(3));
  EXPECT_EQ(cache.find(4)->front(), 4);
  EXPECT_EQ(cache.samples(), 3);
  cache.offer(5, bytes_of(5, 250));  // needs room for 250: evicts three
  EXPECT_EQ(cache.samples(), 1);
  EXPECT_EQ(cache.size_bytes(), 250);
  cache.offer(6, bytes_of(6, 301));  // larger than the cache: never kept, nothing evicted
  EXPECT_EQ(cache.samples(), 1);
  const CacheCounters c = cache.take_counters();
  EXPECT_EQ(c.hits, 4);
  EXPECT_EQ(c.misses, 1);
  EXPECT_EQ(c.bytes_missed, 300 + 100 + 250 + 301);
  EXPECT_EQ(cache.take_counters().hits, 0) << "taken counters start again";
}

TEST(SampleCache, ConcurrentPrepThreadsCountEveryLookup) {
  SampleCache cache(1000 * 10, CachePolicy::lru);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (std::int64_t k = 0; k < 2000; ++k) {
        const std::int64_t key = (k * 7 + t) % 1500;
        if (!cache.find(key)) cache.offer(key, bytes_of(key, 10));
      }
    });
  }
  for (auto& th : threads) th.join();
  const CacheCounters c = cache.take_counters();
  EXPECT_EQ(c.hits + c.misses, 4 * 2000);
  EXPECT_LE(cache.size_bytes(), 1000 * 10);
}

TEST(SampleCache, PoliciesParseByNameAndBadInputIsRefused) {
  EXPECT_EQ(parse_cache_policy("minio", "--cache-policy"), CachePolicy::minio);
  EXPECT_EQ(cache_policy_name(parse_cache_policy("lru", "--cache-policy")), "lru");
  try {
    parse_cache_policy("fifo", "--cache-policy");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--cache-policy 'fifo' is not a cache policy; expected lru or minio"),
              std::string::npos);
  }
  EXPECT_THROW(SampleCache(-1, CachePolicy::lru), UsageError);
  SampleCache c(10, CachePolicy::minio);
  EXPECT_THROW(c.offer(1, nullptr), Error);
}

}  // namespace
}  // namespace memtrain::data
