#include "data/sentence_batcher.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace memtrain::data {

SentenceBatcher::SentenceBatcher(const TaggingDataset& data, std::int64_t batch_size, std::uint64_t seed)
    : data_(data), batch_size_(batch_size), cursor_(data.sentences(), seed) {
  if (data.sentences() == 0) throw DataError("sentence batcher: the dataset has no sentences");
  if (batch_size < 1 || batch_size > data.sentences()) {
    throw UsageError("batch size " + std::to_string(batch_size) + " is out of range; expected 1.." +
                     std::to_string(data.sentences()) + " (the number of sentences)");
  }
}

std::int64_t SentenceBatcher::batches_per_epoch() const { return (data_.sentences() + batch_size_ - 1) / batch_size_; }

TokenBatch SentenceBatcher::next() { return make(cursor_.take(batch_size_)); }

TokenBatch SentenceBatcher::largest() const {
  std::vector<std::int64_t> idx(data_.sentences());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + batch_size_, idx.end(), [&](std::int64_t a, std::int64_t b) {
    const size_t la = data_.word_ids[a].size(), lb = data_.word_ids[b].size();
    return la != lb ? la > lb : a < b;
  });
  idx.resize(batch_size_);
  return make(idx);
}

TokenBatch SentenceBatcher::make(const std::vector<std::int64_t>& sentences) const {
  TokenBatch b;
  b.batch = static_cast<std::int64_t>(sentences.size());
  for (std::int64_t s : sentences) {
    b.length = std::max<std::int64_t>(b.length, static_cast<std::int64_t>(data_.word_ids[s].size()));
  }
  const size_t cells = static_cast<size_t>(b.batch * b.length);
  b.words.assign(cells, TaggingDataset::kPadWord);
  b.tags.assign(cells, TokenBatch::kIgnoreTag);
  b.valid.assign(cells, 0);
  for (std::int64_t r = 0; r < b.batch; ++r) {
    const auto& w = data_.word_ids[sentences[r]];
    const auto& t = data_.tag_ids[sentences[r]];
    for (size_t c = 0; c < w.size(); ++c) {
      const size_t k = static_cast<size_t>(r * b.length) + c;
      b.words[k] = w[c];
      b.tags[k] = t[c];
      b.valid[k] = 1;
    }
    b.tokens += static_cast<std::int64_t>(w.size());
  }
  return b;
}

}  // namespace memtrain::data
