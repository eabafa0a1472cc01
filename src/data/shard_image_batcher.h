// Batches of augmented images from packed shards, through the prep pipeline:
// the prep threads read (via the cache), decode, crop, flip and normalise
// each sample at its batch's side, which is drawn per batch from
// [min_scale, max_scale]. Batch k of an epoch is the samples at positions
// k*B .. k*B+B-1 of that epoch's seeded order, so the batches and their
// augmentations are the same whatever the number of prep threads; a sample
// skipped as corrupt leaves its batch one short. One rank of `ranks`
// prepares only its rows of each batch (rank_rows()), so each rank reads
// and decodes its share alone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/augment.h"
#include "data/prep_pipeline.h"
#include "data/rank_rows.h"

namespace memtrain::data {

struct ShardBatchOptions {
  std::int64_t batch_size = 32;
  std::int64_t min_scale = 28, max_scale = 112;  // per-batch side, pixels
  std::int64_t classes = 10;                     // `.cls` labels must lie in 0..classes-1
  std::uint64_t seed = 1;                        // order, sides and augmentation
  int rank = 0, ranks = 1;                       // this rank's rows of each batch of batch_size
  AugmentOptions augment;
  PrepOptions prep;  // its seed and transform are set from the above
};

struct AugmentedBatch {
  std::int64_t epoch = 0;
  std::int64_t index = 0;            // batch within its epoch
  std::int64_t batch = 0;            // images
  std::int64_t side = 0;             // pixels
  std::vector<float> pixels;         // batch x side x side
  std::vector<std::int64_t> labels;  // batch
};

// The side of batch `batch` of `epoch`, drawn from [min_scale, max_scale].
std::int64_t batch_side(const ShardBatchOptions& options, std::int64_t epoch, std::int64_t batch);
// A sample's label from its `.cls`; DataError naming where it is otherwise.
std::int64_t sample_label(const ShardStorage& storage, const ShardBatchOptions& options, const PreparedSample& sample);
// Augments a decoded sample at its batch's side with its own seeded stream
// (the same whoever prepares it), checks its label, drops the decoded image.
void augment_sample(const ShardStorage& storage, const ShardBatchOptions& options, PreparedSample& sample);

// Batch `batch` of `epoch` prepared here and now, on the calling thread:
// what ShardImageBatcher::next() returns for it. A corrupt sample throws,
// or with prep.skip_corrupt is left out and counted in `skipped`.
AugmentedBatch prepare_image_batch(const ShardStorage& storage, SampleCache* cache, const ShardBatchOptions& options,
                                   std::int64_t epoch, std::int64_t batch, std::int64_t* skipped);

// batch_size whole images (no crop, no flip) at max_scale, the first of the
// dataset: the largest input (this rank's rows of it). Read warm, past any cache.
AugmentedBatch largest_image_batch(const ShardStorage& storage, const ShardBatchOptions& options);

class ShardImageBatcher {
 public:
  // UsageError for options out of range; the storage and cache (which may be
  // null) must outlive the batcher.
  ShardImageBatcher(const ShardStorage& storage, SampleCache* cache, ShardBatchOptions options);

  AugmentedBatch next();           // rolls over into the next epoch
  AugmentedBatch largest() const;  // largest_image_batch()

  std::int64_t side_of(std::int64_t epoch, std::int64_t batch) const { return batch_side(options_, epoch, batch); }
  std::int64_t epoch() const { return epoch_; }  // of the batch last returned
  std::int64_t batches_per_epoch() const;
  PrepCounters counters() const { return pipeline_->counters(); }
  const ShardBatchOptions& options() const { return options_; }

 private:
  // Samples in batch `batch` of an epoch, and this rank's rows of it.
  RankRows rows_of(std::int64_t batch) const;

  const ShardStorage& storage_;
  ShardBatchOptions options_;
  std::unique_ptr<PrepPipeline> pipeline_;
  std::optional<PreparedSample> pending_;  // delivered but belonging to the next batch
  std::int64_t epoch_ = 0;
};

}  // namespace memtrain::data
