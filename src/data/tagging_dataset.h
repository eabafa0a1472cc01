// Part-of-speech tagging data: sentences as word ids and tag ids.
#pragma once

#include <cstdint>
#include <vector>

#include "data/brown_corpus.h"
#include "data/vocabulary.h"

namespace memtrain::data {

struct TaggingDataset {
  static constexpr std::int64_t kPadWord = 0;
  static constexpr std::int64_t kUnknownWord = 1;

  Vocabulary words;                                 // lower-cased words; <pad> = 0, <unk> = 1
  Vocabulary tags;                                  // simplified Brown tags
  std::vector<std::vector<std::int64_t>> word_ids;  // per sentence
  std::vector<std::vector<std::int64_t>> tag_ids;   // per sentence, same lengths
  std::int64_t max_length = 0;                      // longest sentence, tokens
  std::int64_t unknown_tokens = 0;                  // tokens mapped to <unk>

  std::int64_t sentences() const { return static_cast<std::int64_t>(word_ids.size()); }
};

// max_vocabulary: most frequent words kept (with <pad> and <unk>); 0 keeps all.
TaggingDataset make_tagging_dataset(const BrownCorpus& corpus, std::int64_t max_vocabulary);

// The sentences of at most `max_length` tokens (the vocabularies unchanged),
// for training or profiling at a bounded sequence length. DataError when
// none is left.
TaggingDataset keep_sentences_up_to(TaggingDataset data, std::int64_t max_length);

}  // namespace memtrain::data
