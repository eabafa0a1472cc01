#include <gtest/gtest.h>

#include "core/error.h"
#include "data/cache_epochs.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

// 200 small images in 4 shards.
std::string packed(const testing::TempDir& dir) {
  testing::pack_synthetic_images(200, 48 * 1024, dir.path() + "/shards");
  return dir.path() + "/shards";
}

TEST(ShardStorage, IndexesEverySampleAndReadsItBack) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir));
  EXPECT_GT(storage.shards().size(), 1u);
  ASSERT_EQ(storage.samples().size(), 200u);
  const ShardSample s = storage.parse(123, storage.read(123, true));
  EXPECT_EQ(s.key, "000123");
  EXPECT_EQ(std::string(s.files.at("cls").begin(), s.files.at("cls").end()), "3");
  Bytes total = 0;
  for (const SampleExtent& e : storage.samples()) total += e.length;
  EXPECT_EQ(storage.dataset_bytes(), total);
  EXPECT_THROW(ShardStorage(dir.path()), DataError) << "a directory without shards";
}

TEST(CacheEpochs, MinioReadsFarLessThanLruFromTheSecondEpochOnADatasetTwiceTheCache) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir));
  const Bytes half = storage.dataset_bytes() / 2;
  SampleCache lru(half, CachePolicy::lru), minio(half, CachePolicy::minio);
  CacheEpochOptions o;
  o.epochs = 3;
  const auto l = run_cache_epochs(storage, lru, o);
  const auto m = run_cache_epochs(storage, minio, o);
  EXPECT_EQ(l[0].storage_bytes_read, storage.dataset_bytes());
  EXPECT_EQ(m[0].storage_bytes_read, storage.dataset_bytes());
  for (int e = 1; e < 3; ++e) {
    EXPECT_NEAR(m[e].hit_rate, 0.5, 0.03) << e;
    EXPECT_LT(l[e].hit_rate, 0.40) << e;
    EXPECT_LT(static_cast<double>(m[e].storage_bytes_read), 0.85 * static_cast<double>(l[e].storage_bytes_read)) << e;
  }
}

}  // namespace
}  // namespace memtrain::data
