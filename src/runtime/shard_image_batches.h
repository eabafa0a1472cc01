// Images from packed shards as training batches: the input pipeline
// (data/shard_image_batcher.h: cache, prep threads, augmentation) turned into
// tensors [B, 1, S, S] on the device, S the batch's side.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/units.h"
#include "data/sample_cache.h"
#include "data/shard_image_batcher.h"
#include "data/shard_storage.h"
#include "runtime/batch_source.h"

namespace memtrain::runtime {

struct ShardSourceOptions {
  std::string dir;                                 // shards written by `memtrain data pack`
  data::ShardBatchOptions batches;
  std::optional<BudgetSpec> cache_size;            // bytes or N% of the dataset; none: no cache
  data::CachePolicy cache_policy = data::CachePolicy::minio;
};

class ShardImageBatches : public BatchSource {
 public:
  explicit ShardImageBatches(ShardSourceOptions options);

  Batch next(const torch::Device& device) override;
  // The next batch as the pipeline made it, on the host (next() is this, to_tensors()'d).
  data::AugmentedBatch next_augmented() { return batcher_->next(); }
  Batch largest(const torch::Device& device) override;
  std::string describe() const override;
  std::int64_t epoch() const override { return batcher_->epoch(); }
  std::int64_t batches_per_epoch() const override { return batcher_->batches_per_epoch(); }

  data::PrepCounters prep_counters() const { return batcher_->counters(); }
  const data::ShardStorage& storage() const { return *storage_; }
  const data::SampleCache* cache() const { return cache_.get(); }

  static Batch to_tensors(const data::AugmentedBatch& b, const torch::Device& device);

 private:
  ShardSourceOptions options_;
  std::unique_ptr<data::ShardStorage> storage_;
  std::unique_ptr<data::SampleCache> cache_;
  std::unique_ptr<data::ShardImageBatcher> batcher_;
};

}  // namespace memtrain::runtime
