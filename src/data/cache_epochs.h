// Epochs over packed shards through a sample cache, in a new seeded random
// order each: what `memtrain data bench` runs to compare cache policies.
// Each sample is looked up in the cache; a miss reads it from storage (cold
// when asked) and offers it to the cache; then it is parsed and its JPEG
// decoded, exactly as the prep pipeline does (fetch_sample, prepare_sample),
// here on one thread so each epoch's counters are its own.
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"
#include "data/sample_cache.h"
#include "data/shard_storage.h"

namespace memtrain::data {

struct CacheEpochOptions {
  int epochs = 3;
  std::uint64_t seed = 1;
  bool cold = true;    // drop each range's pages before a storage read
  bool decode = true;  // decode the JPEGs of every sample
};

struct EpochReport {
  std::int64_t epoch = 0;
  std::int64_t samples = 0;
  Bytes storage_bytes_read = 0;  // what the misses read from the shards
  Bytes device_bytes_read = -1;  // what the kernel fetched from the device meanwhile; -1: not reported
  double hit_rate = 0;
  Seconds seconds = 0;
};

std::vector<EpochReport> run_cache_epochs(const ShardStorage& storage, SampleCache& cache,
                                          const CacheEpochOptions& options);

}  // namespace memtrain::data
