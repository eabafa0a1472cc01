// Images from packed shards as training batches: the input pipeline
// (data/shard_image_batcher.h: cache, prep threads, augmentation) turned into
// tensors [B, 1, S, S] on the device, S the batch's side.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "data/coordinated_batches.h"
#include "data/partitioned_cache.h"
#include "data/sample_cache.h"
#include "data/shard_image_batcher.h"
#include "data/shard_storage.h"
#include "runtime/input/batch_source.h"

namespace memtrain::runtime {

struct ShardSourceOptions {
  std::string dir;  // shards written by `memtrain data pack`
  data::ShardBatchOptions batches;
  std::optional<BudgetSpec> cache_size;  // bytes or N% of the dataset; none: no cache
  data::CachePolicy cache_policy = data::CachePolicy::minio;
  // Set: the batches come from a group of jobs sharing their preparation
  // (data/coordinated_batches.h) instead of this job's own pipeline.
  std::optional<data::CoordinationOptions> coordinate;
  // One rank of a data-parallel job (batches.rank, batches.ranks) whose
  // cache is CoorDL's partitioned one: each rank caches its own seeded part
  // of the dataset (minio, cache_size each) and fetches the rest from its
  // owner. The ranks meet through `exchange` (every rank's text under a
  // name, in rank order: RankGroup::exchange).
  struct Partition {
    std::string listen_host;  // where the peers reach this rank
    Seconds timeout = 60;     // a peer that does not answer within this is named
    std::function<std::vector<std::string>(const std::string& name, const std::string& text)> exchange;
  };
  std::optional<Partition> partition;
};

class ShardImageBatches : public BatchSource {
 public:
  explicit ShardImageBatches(ShardSourceOptions options);

  Batch next(const torch::Device& device) override;
  // The next batch as the pipeline made it, on the host (next() is this, to_tensors()'d).
  data::AugmentedBatch next_augmented();
  Batch largest(const torch::Device& device) override;
  std::string describe() const override;
  std::int64_t epoch() const override;
  std::int64_t batches_per_epoch() const override;

  // The group's counters when coordinated, else this job's own pipeline's.
  std::optional<PipelineCounters> pipeline_counters() const override;
  // This job's own pipeline's counters (zero when coordinated).
  data::PrepCounters prep_counters() const;
  // The group's counters for this job, when coordinated.
  std::optional<data::CoordinationCounters> coordination_counters() const;
  const data::ShardStorage& storage() const { return *storage_; }
  const data::SampleCache* cache() const { return partitioned_ ? &partitioned_->cache() : cache_.get(); }

  static Batch to_tensors(const data::AugmentedBatch& b, const torch::Device& device);

 private:
  ShardSourceOptions options_;
  std::unique_ptr<data::ShardStorage> storage_;
  std::unique_ptr<data::SampleCache> cache_;
  std::unique_ptr<data::PartitionedSampleCache> partitioned_;  // instead of cache_, with options.partition
  mutable data::PartitionedCacheCounters partitioned_total_;   // its counters since the start
  std::unique_ptr<data::ShardImageBatcher> batcher_;           // one of these two
  std::unique_ptr<data::CoordinatedBatcher> coordinated_;
};

}  // namespace memtrain::runtime
