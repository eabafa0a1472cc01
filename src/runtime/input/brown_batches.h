// Brown-corpus batches as tensors: token ids [B, T], targets [B, T] (-100
// where nothing is predicted), key padding mask [B, T]; signature B x T.
// The targets are each word's tag (tagging) or the sentence's next word
// (language modelling, for the gpt decoder).
#pragma once

#include <memory>

#include "data/sentence_batcher.h"
#include "data/tagging_dataset.h"
#include "runtime/input/batch_source.h"

namespace memtrain::runtime {

enum class BrownTargets { Tags, NextWord };

class BrownBatches : public BatchSource {
 public:
  BrownBatches(std::shared_ptr<const data::TaggingDataset> data, std::int64_t batch_size, std::uint64_t seed,
               BrownTargets targets = BrownTargets::Tags);

  Batch next(const torch::Device& device) override;
  Batch largest(const torch::Device& device) override;
  std::string describe() const override;
  std::int64_t epoch() const override { return batcher_.epoch(); }
  std::int64_t batches_per_epoch() const override { return batcher_.batches_per_epoch(); }

  const data::TaggingDataset& dataset() const { return *data_; }
  static Batch to_tensors(const data::TokenBatch& b, const torch::Device& device,
                          BrownTargets targets = BrownTargets::Tags);
  // Per position, the id of the sentence's next word; kIgnoreTag at its last
  // word and at padding.
  static std::vector<std::int64_t> next_words(const data::TokenBatch& b);

 private:
  BrownTargets targets_;
  std::shared_ptr<const data::TaggingDataset> data_;
  data::SentenceBatcher batcher_;
};

}  // namespace memtrain::runtime
