// Epochs over packed shards through a sample cache, in a new seeded random
// order each: what `memtrain data bench` runs to compare cache policies.
// Each sample is looked up in the cache; a miss reads it from storage (cold
// when asked) and offers it to the cache; then it is parsed and its JPEG
// decoded, exactly as the prep pipeline does (fetch_sample, prepare_sample),
// here on one thread so each epoch's counters are its own.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/units.h"
#include "data/partitioned_cache.h"
#include "data/sample_cache.h"
#include "data/shard_storage.h"

namespace memtrain::data {

struct CacheEpochOptions {
  int epochs = 3;
  std::uint64_t seed = 1;
  bool cold = true;    // drop each range's pages before a storage read
  bool decode = true;  // decode the JPEGs of every sample
  // Rank `rank` of `world` takes every world-th sample of each epoch's
  // order, from position `rank`; the ranks together see each sample once.
  int rank = 0;
  int world = 1;
  // The ranks' barrier, run at each epoch's end before and after its
  // counters are read, so what a rank serves its peers counts in the epoch
  // they ask in. None with one rank.
  std::function<void()> barrier;
};

struct EpochReport {
  std::int64_t epoch = 0;
  std::int64_t samples = 0;
  Bytes storage_bytes_read = 0;  // what the misses read from the shards
  Bytes device_bytes_read = -1;  // what the kernel fetched from the device meanwhile; -1: not reported
  double hit_rate = 0;           // of this rank's lookups, served by its own cache
  Seconds seconds = 0;
  // With a partitioned cache: what came from the owning peers, and what
  // this rank sent them (its storage reads include theirs).
  Bytes peer_bytes_read = 0;
  Bytes bytes_served = 0;
  // Sum over the samples delivered of a hash of (index, bytes): ranks'
  // digests add up to one process's, so every byte can be checked.
  std::uint64_t digest = 0;
};

// The hash a digest adds up for one sample (FNV-1a over the index's 8 bytes,
// least significant first, then the sample's bytes).
std::uint64_t sample_digest(std::int64_t index, const std::vector<std::uint8_t>& bytes);

std::vector<EpochReport> run_cache_epochs(const ShardStorage& storage, SampleCache& cache,
                                          const CacheEpochOptions& options);

// The same epochs through a partitioned cache already connected to its peers.
std::vector<EpochReport> run_partitioned_epochs(const ShardStorage& storage, PartitionedSampleCache& cache,
                                                const CacheEpochOptions& options);

}  // namespace memtrain::data
