// Batches of B sentences in a seeded random order, padded to the longest
// sentence of the batch: the sequence length, and so the memory a step
// needs, changes from one step to the next. Every sentence is used once per
// epoch; the last batch of an epoch holds what is left.
#pragma once

#include <cstdint>
#include <vector>

#include "data/seeded_order.h"
#include "data/tagging_dataset.h"

namespace memtrain::data {

struct TokenBatch {
  static constexpr std::int64_t kIgnoreTag = -100;  // target of padding positions

  std::int64_t batch = 0;           // sentences
  std::int64_t length = 0;          // tokens per sentence after padding
  std::vector<std::int64_t> words;  // batch x length, padding = TaggingDataset::kPadWord
  std::vector<std::int64_t> tags;   // batch x length, padding = kIgnoreTag
  std::vector<std::uint8_t> valid;  // batch x length, 1 for real tokens
  std::int64_t tokens = 0;          // real tokens
};

class SentenceBatcher {
 public:
  SentenceBatcher(const TaggingDataset& data, std::int64_t batch_size, std::uint64_t seed);

  TokenBatch next();
  // The batch of the batch_size longest sentences: the largest input.
  TokenBatch largest() const;

  std::int64_t epoch() const { return cursor_.epoch(); }
  std::int64_t batches_per_epoch() const;

 private:
  TokenBatch make(const std::vector<std::int64_t>& sentences) const;

  const TaggingDataset& data_;
  std::int64_t batch_size_;
  EpochCursor cursor_;
};

}  // namespace memtrain::data
