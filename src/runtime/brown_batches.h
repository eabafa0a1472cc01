// Brown-corpus tagging batches as tensors: token ids [B, T], tags [B, T]
// (-100 at padding), key padding mask [B, T]; signature B x T.
#pragma once

#include <memory>

#include "data/sentence_batcher.h"
#include "data/tagging_dataset.h"
#include "runtime/batch_source.h"

namespace memtrain::runtime {

class BrownBatches : public BatchSource {
 public:
  BrownBatches(std::shared_ptr<const data::TaggingDataset> data, std::int64_t batch_size, std::uint64_t seed);

  Batch next(const torch::Device& device) override;
  Batch largest(const torch::Device& device) override;
  std::string describe() const override;
  std::int64_t epoch() const override { return batcher_.epoch(); }
  std::int64_t batches_per_epoch() const override { return batcher_.batches_per_epoch(); }

  const data::TaggingDataset& dataset() const { return *data_; }
  static Batch to_tensors(const data::TokenBatch& b, const torch::Device& device);

 private:
  std::shared_ptr<const data::TaggingDataset> data_;
  data::SentenceBatcher batcher_;
};

}  // namespace memtrain::runtime
