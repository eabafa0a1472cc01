// The input pipeline's two costs measured alone, for the stall model: how
// fast prep threads decode and augment samples already in memory, and how
// fast threads read samples cold from storage.
#pragma once

#include "core/units.h"
#include "data/shard_image_batcher.h"
#include "data/shard_storage.h"

namespace memtrain::data {

struct RateMeasurement {
  std::int64_t samples = 0;
  Seconds seconds = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(samples) / seconds : 0; }
};

// One epoch of `options`' batches from a cache already holding every sample
// (filled before the clock starts), on options.prep.threads threads.
RateMeasurement measure_prep_rate(const ShardStorage& storage, const ShardBatchOptions& options);

// Every sample read cold (at most `limit`, 0: all), in a seeded random
// order, by `threads` threads, without parsing.
RateMeasurement measure_fetch_rate(const ShardStorage& storage, int threads, std::uint64_t seed, std::int64_t limit);

}  // namespace memtrain::data
