// The input pipeline's preparation stage: a pool of prep threads that read
// samples (through the cache, from storage on a miss), parse and decode them,
// and a bounded prefetch queue that hands them out in the epoch's seeded
// order whatever the number of threads. A corrupt sample is an error naming
// its shard and byte offset, or, with skip_corrupt, counted and left out.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/units.h"
#include "data/jpeg_codec.h"
#include "data/sample_cache.h"
#include "data/shard_storage.h"

namespace memtrain::data {

struct PreparedSample {
  std::int64_t index = 0;  // in the storage's sample list
  std::int64_t epoch = 0;
  std::int64_t position = 0;  // in the epoch's order
  std::string key;
  GrayImage image;                // decoded `.jpg`, when the sample has one
  std::string text;               // `.txt`, when it has one
  std::string label;              // `.cls` or `.tags`
  std::vector<float> augmented;   // what a transform made of `image` (augment.h)
  std::int64_t class_index = -1;  // `label` as a class, once a transform has checked it
};

// Run by the prep threads on every decoded sample (augmentation); may throw
// DataError for a sample it cannot use, which counts as corrupt.
using SampleTransform = std::function<void(PreparedSample&)>;

// CPU time the calling thread has used: what preparing costs, apart from waiting.
Seconds thread_cpu_seconds();

// A sample's stored bytes: from `cache` when it has them (it may be null),
// else read from storage (cold when asked) and offered to the cache.
SampleCache::Sample fetch_sample(const ShardStorage& storage, SampleCache* cache, std::int64_t index, bool cold);

// Parses a sample's bytes and decodes its JPEG; DataError naming the shard,
// the byte offset and the sample when it is corrupt.
PreparedSample prepare_sample(const ShardStorage& storage, std::int64_t index, const std::vector<std::uint8_t>& bytes);

struct PrepOptions {
  int threads = 2;       // prep threads, >= 1
  int queue_depth = 64;  // samples prepared ahead of the consumer, >= 1
  std::uint64_t seed = 1;
  bool cold = true;  // storage reads bypass the page cache
  bool skip_corrupt = false;
  SampleTransform transform;  // none when empty
  // The positions of each epoch's order this pipeline prepares (a rank's
  // share of the ranks' batches); all when empty.
  std::function<bool(std::int64_t position)> keep;
  // Where a sample's bytes come from (a cache partitioned across ranks);
  // fetch_sample() through the pipeline's cache when empty.
  std::function<SampleCache::Sample(std::int64_t index)> fetch;
};

struct PrepCounters {
  std::int64_t delivered = 0;
  std::int64_t skipped_corrupt = 0;
  std::vector<std::string> skipped;   // "shard at byte offset N: why", per skipped sample
  Seconds consumer_wait_seconds = 0;  // time next() spent waiting for a prepared sample
  Seconds prep_cpu_seconds = 0;       // CPU time the prep threads spent preparing samples
};

class PrepPipeline {
 public:
  // `cache` may be null. Starts the threads on epoch 0.
  PrepPipeline(const ShardStorage& storage, SampleCache* cache, PrepOptions options);
  ~PrepPipeline();
  PrepPipeline(const PrepPipeline&) = delete;
  PrepPipeline& operator=(const PrepPipeline&) = delete;

  // The next sample of this epoch in order, or nullopt at its end (then the
  // next call starts the following epoch). Rethrows a preparation error.
  std::optional<PreparedSample> next();
  std::int64_t epoch() const { return epoch_; }
  PrepCounters counters() const;

 private:
  struct Slot {
    std::optional<PreparedSample> sample;  // empty: skipped as corrupt
    std::string error;                     // a failure to rethrow
  };
  void start_epoch();
  void stop_threads();
  void work();
  Slot prepare(std::int64_t position) const;

  const ShardStorage& storage_;
  SampleCache* cache_;
  PrepOptions options_;
  std::int64_t epoch_ = 0;
  std::vector<std::int64_t> order_;
  std::vector<std::int64_t> positions_;  // of order_, the ones this pipeline prepares

  mutable std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::int64_t claimed_ = 0;           // entries of positions_ handed to workers
  std::int64_t consumed_ = 0;          // entries of positions_ taken by next()
  std::map<std::int64_t, Slot> done_;  // by entry of positions_; bounded by queue_depth
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  PrepCounters counters_;
};

}  // namespace memtrain::data
