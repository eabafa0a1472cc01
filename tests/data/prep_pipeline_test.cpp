#include <gtest/gtest.h>

#include "core/error.h"
#include "data/prep_pipeline.h"
#include "data/seeded_order.h"
#include "data/tar_shard.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

// 60 small images in several shards; with `corrupt`, sample 17's JPEG is cut short.
std::string packed(const testing::TempDir& dir, bool corrupt) {
  const PackResult r = testing::pack_synthetic_images(60, 16 * 1024, dir.path() + "/shards");
  if (corrupt) testing::change_sample(r.shards, "000017", [](auto& files) { files["jpg"].resize(30); });
  return dir.path() + "/shards";
}

std::vector<std::string> epoch_keys(PrepPipeline& p) {
  std::vector<std::string> keys;
  while (auto s = p.next()) keys.push_back(s->key);
  return keys;
}

TEST(PrepPipeline, DeliversEachEpochInItsSeededOrderWhateverTheThreads) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir, false));
  PrepOptions one, four;
  one.threads = 1;
  four.threads = 4;
  four.queue_depth = 3;
  PrepPipeline a(storage, nullptr, one), b(storage, nullptr, four);
  const std::vector<std::string> first = epoch_keys(a);
  ASSERT_EQ(first.size(), 60u);
  EXPECT_EQ(first, epoch_keys(b));
  const std::vector<std::int64_t> order = epoch_order(60, one.seed, 0);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(std::stoll(first[i]), order[i]);
  const std::vector<std::string> second = epoch_keys(a);
  EXPECT_EQ(second.size(), 60u);
  EXPECT_NE(second, first) << "a new order each epoch";
  EXPECT_EQ(a.epoch(), 2);
  EXPECT_EQ(a.counters().delivered, 120);
}

TEST(PrepPipeline, DecodesImagesAndLabelsThroughTheCache) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir, false));
  SampleCache cache(storage.dataset_bytes(), CachePolicy::minio);
  PrepPipeline p(storage, &cache, {});
  while (auto s = p.next()) {
    EXPECT_EQ(s->image.width, 32);
    EXPECT_EQ(s->label, std::to_string(std::stoll(s->key) % 10));
  }
  epoch_keys(p);
  // Each sample is read from storage once; the second epoch is served from
  // the cache, and the threads may already have prefetched some of the third.
  const CacheCounters c = cache.take_counters();
  EXPECT_EQ(c.misses, 60);
  EXPECT_GE(c.hits, 60);
  EXPECT_LE(c.hits, 60 + PrepOptions{}.queue_depth);
}

TEST(PrepPipeline, ACorruptSampleNamesItsShardAndOffsetOrIsSkippedAndCounted) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir, true));
  PrepPipeline strict(storage, nullptr, {});
  try {
    epoch_keys(strict);
    FAIL() << "a corrupt JPEG went through";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("at byte offset"), std::string::npos) << what;
    EXPECT_NE(what.find("(sample 000017)"), std::string::npos) << what;
    EXPECT_NE(what.find(".tar"), std::string::npos) << what;
  }
  PrepOptions o;
  o.skip_corrupt = true;
  o.threads = 3;
  PrepPipeline lenient(storage, nullptr, o);
  const std::vector<std::string> keys = epoch_keys(lenient);
  EXPECT_EQ(keys.size(), 59u);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "000017"), 0);
  const PrepCounters c = lenient.counters();
  EXPECT_EQ(c.skipped_corrupt, 1);
  ASSERT_EQ(c.skipped.size(), 1u);
  EXPECT_NE(c.skipped[0].find("sample 000017"), std::string::npos);
}

TEST(PrepPipeline, RefusesBadSettings) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir, false));
  PrepOptions o;
  o.threads = 0;
  EXPECT_THROW(PrepPipeline(storage, nullptr, o), UsageError);
  o.threads = 1;
  o.queue_depth = 0;
  EXPECT_THROW(PrepPipeline(storage, nullptr, o), UsageError);
}

}  // namespace
}  // namespace memtrain::data
