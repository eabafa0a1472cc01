// Partitioned caches of three ranks, each on its own thread in this process,
// talking over real loopback sockets.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "data/cache_epochs.h"
#include "data/partitioned_cache.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

std::string packed(const testing::TempDir& dir) {
  testing::pack_synthetic_images(300, 48 * 1024, dir.path() + "/shards");
  return dir.path() + "/shards";
}

// The ranks' end-of-epoch barrier.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int round = round_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++round_;
      all_.notify_all();
      return;
    }
    all_.wait(lock, [&] { return round_ != round; });
  }

 private:
  const int count_;
  int arrived_ = 0, round_ = 0;
  std::mutex mutex_;
  std::condition_variable all_;
};

std::vector<std::unique_ptr<PartitionedSampleCache>> connected(const ShardStorage& storage, int world, Bytes capacity,
                                                               std::uint64_t seed = 7) {
  std::vector<std::unique_ptr<PartitionedSampleCache>> caches;
  std::vector<std::string> addresses;
  for (int r = 0; r < world; ++r) {
    caches.push_back(
        std::make_unique<PartitionedSampleCache>(storage, capacity, r, world, seed, false, "127.0.0.1", 10.0));
    addresses.push_back(caches.back()->address());
  }
  for (auto& c : caches) c->connect(addresses);
  return caches;
}

TEST(PartitionOwners, CutASeededPermutationIntoNearEqualParts) {
  for (int world : {1, 2, 3, 7}) {
    const std::vector<int> owners = partition_owners(1000, world, 5);
    std::vector<int> count(world, 0);
    for (int o : owners) {
      ASSERT_GE(o, 0);
      ASSERT_LT(o, world);
      ++count[o];
    }
    for (int c : count) EXPECT_LE(std::abs(c - 1000 / world), 1) << world;
  }
  EXPECT_EQ(partition_owners(1000, 3, 5), partition_owners(1000, 3, 5));
  EXPECT_NE(partition_owners(1000, 3, 5), partition_owners(1000, 3, 6));
  // Not blocks of consecutive samples: shards are not owned whole.
  const std::vector<int> owners = partition_owners(1000, 3, 5);
  int changes = 0;
  for (std::size_t i = 1; i < owners.size(); ++i) changes += owners[i] != owners[i - 1];
  EXPECT_GT(changes, 300);
}

TEST(PartitionedSampleCache, ThreeRanksGetEveryByteAndReadStorageOnlyInTheFirstEpoch) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir));
  const int world = 3;
  // 35% each: together more than the dataset, each more than its third.
  auto caches = connected(storage, world, storage.dataset_bytes() * 35 / 100);
  std::uint64_t expected = 0;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(storage.samples().size()); ++i)
    expected += sample_digest(i, storage.read(i, false));

  Barrier barrier(world);
  std::vector<std::vector<EpochReport>> reports(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      CacheEpochOptions o;
      o.epochs = 3;
      o.cold = false;
      o.decode = false;
      o.rank = r;
      o.world = world;
      o.barrier = [&] { barrier.arrive_and_wait(); };
      reports[r] = run_partitioned_epochs(storage, *caches[r], o);
    });
  }
  for (auto& t : ranks) t.join();
  for (int e = 0; e < 3; ++e) {
    std::uint64_t digest = 0;
    std::int64_t samples = 0;
    Bytes storage_read = 0, from_peers = 0, served = 0;
    for (int r = 0; r < world; ++r) {
      digest += reports[r][e].digest;
      samples += reports[r][e].samples;
      storage_read += reports[r][e].storage_bytes_read;
      from_peers += reports[r][e].peer_bytes_read;
      served += reports[r][e].bytes_served;
    }
    EXPECT_EQ(samples, 300) << "epoch " << e;
    EXPECT_EQ(digest, expected) << "epoch " << e << ": every sample, every byte";
    EXPECT_EQ(storage_read, e == 0 ? storage.dataset_bytes() : 0) << "epoch " << e;
    EXPECT_EQ(from_peers, served) << "epoch " << e;
    // About two thirds of what a rank takes belongs to another.
    EXPECT_GT(from_peers, storage.dataset_bytes() / 2) << "epoch " << e;
  }
  // Each rank keeps only its own part.
  for (int r = 0; r < world; ++r) {
    EXPECT_NEAR(static_cast<double>(caches[r]->cache().size_bytes()), storage.dataset_bytes() / 3.0,
                0.1 * storage.dataset_bytes());
  }
}

TEST(PartitionedSampleCache, RanksThatCutTheDatasetDifferentlyAreRefusedNamingThePeer) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir));
  PartitionedSampleCache a(storage, 0, 0, 2, 7, false, "127.0.0.1", 10.0);
  PartitionedSampleCache b(storage, 0, 1, 2, 8, false, "127.0.0.1", 10.0);
  try {
    a.connect({a.address(), b.address()});
    FAIL() << "a peer with another seed was accepted";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1 at " + b.address()), std::string::npos) << what;
    EXPECT_NE(what.find("seed 8"), std::string::npos) << what;
  }
  EXPECT_THROW(PartitionedSampleCache(storage, 0, 2, 2, 7, false, "127.0.0.1", 10.0), UsageError);
  EXPECT_THROW(PartitionedSampleCache(storage, 0, 0, 2, 7, false, "nowhere", 10.0), UsageError);
}

TEST(PartitionedSampleCache, RanksListenWhereTheyReachTheStoreFrom) {
  EXPECT_EQ(local_address_towards("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(local_address_towards("localhost"), "127.0.0.1");
  EXPECT_THROW(local_address_towards("no-such-host.invalid"), Error);
}

TEST(PartitionedSampleCache, AnOwnerThatIsGoneIsNamed) {
  testing::TempDir dir;
  const ShardStorage storage(packed(dir));
  auto caches = connected(storage, 2, storage.dataset_bytes());
  std::int64_t theirs = 0;
  while (caches[0]->owner(theirs) != 1) ++theirs;
  EXPECT_EQ(*caches[0]->fetch(theirs), storage.read(theirs, false));
  caches[1].reset();
  try {
    caches[0]->fetch(theirs);
    FAIL() << "a sample came from a rank that is gone";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 at"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::data
