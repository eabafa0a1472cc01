#include <set>

#include <gtest/gtest.h>

#include "core/error.h"
#include "data/sentence_batcher.h"

namespace memtrain::data {
namespace {

TaggingDataset dataset_of_lengths(const std::vector<int>& lengths) {
  TaggingDataset d;
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::vector<std::int64_t> w, t;
    for (int k = 0; k < lengths[s]; ++k) {
      w.push_back(static_cast<std::int64_t>(2 + s));  // the sentence's own id
      t.push_back(k % 3);
    }
    d.max_length = std::max<std::int64_t>(d.max_length, lengths[s]);
    d.word_ids.push_back(w);
    d.tag_ids.push_back(t);
  }
  return d;
}

TEST(SentenceBatcher, PadsToTheLongestSentenceOfEachBatch) {
  const TaggingDataset d = dataset_of_lengths({3, 7, 1, 4, 2, 6, 5});
  SentenceBatcher b(d, 3, 1);
  const TokenBatch x = b.next();
  ASSERT_EQ(x.batch, 3);
  ASSERT_EQ(x.words.size(), static_cast<size_t>(3 * x.length));
  std::int64_t real = 0, longest = 0;
  for (std::int64_t r = 0; r < 3; ++r) {
    std::int64_t len = 0;
    for (std::int64_t c = 0; c < x.length; ++c) {
      const size_t k = r * x.length + c;
      if (x.valid[k]) {
        ++len;
        EXPECT_NE(x.words[k], TaggingDataset::kPadWord);
        EXPECT_GE(x.tags[k], 0);
      } else {
        EXPECT_EQ(x.words[k], TaggingDataset::kPadWord);
        EXPECT_EQ(x.tags[k], TokenBatch::kIgnoreTag);
      }
    }
    real += len;
    longest = std::max(longest, len);
  }
  EXPECT_EQ(longest, x.length);
  EXPECT_EQ(real, x.tokens);
}

TEST(SentenceBatcher, UsesEverySentenceOncePerEpochInASeededOrder) {
  const TaggingDataset d = dataset_of_lengths({3, 7, 1, 4, 2, 6, 5});
  SentenceBatcher a(d, 3, 42), again(d, 3, 42);
  EXPECT_EQ(a.batches_per_epoch(), 3);
  std::multiset<std::int64_t> seen;
  std::set<std::int64_t> lengths;
  for (int i = 0; i < 3; ++i) {
    const TokenBatch x = a.next();
    EXPECT_EQ(x.words, again.next().words);
    lengths.insert(x.length);
    for (size_t k = 0; k < x.words.size(); k += static_cast<size_t>(x.length)) seen.insert(x.words[k]);
  }
  EXPECT_EQ(seen, (std::multiset<std::int64_t>{2, 3, 4, 5, 6, 7, 8})) << "each sentence exactly once";
  EXPECT_GT(lengths.size(), 1u) << "the padded length changes from batch to batch";
  EXPECT_EQ(a.epoch(), 0);
  a.next();
  EXPECT_EQ(a.epoch(), 1);
}

TEST(SentenceBatcher, LargestTakesTheLongestSentences) {
  const TaggingDataset d = dataset_of_lengths({3, 7, 1, 4, 2, 6, 5});
  const TokenBatch x = SentenceBatcher(d, 2, 1).largest();
  EXPECT_EQ(x.length, 7);
  EXPECT_EQ(x.tokens, 13);
}

TEST(TaggingDataset, KeepsOnlySentencesUpToAMaximumLength) {
  const TaggingDataset d = keep_sentences_up_to(dataset_of_lengths({3, 7, 1, 4, 2, 6, 5}), 4);
  ASSERT_EQ(d.sentences(), 4);
  EXPECT_EQ(d.max_length, 4);
  EXPECT_EQ(d.word_ids[1], std::vector<std::int64_t>({4}));  // the third sentence (length 1): order kept
  EXPECT_EQ(d.word_ids[2].size(), 4u);
  EXPECT_EQ(SentenceBatcher(d, 2, 1).largest().length, 4);
  try {
    keep_sentences_up_to(dataset_of_lengths({3, 7}), 2);
    FAIL() << "kept nothing without an error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("maximum sentence length 2 leaves no sentence; the shortest has 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(SentenceBatcher, RejectsABatchLargerThanTheData) {
  const TaggingDataset d = dataset_of_lengths({3, 4});
  EXPECT_THROW(SentenceBatcher(d, 3, 1), UsageError);
  EXPECT_THROW(SentenceBatcher(d, 0, 1), UsageError);
}

}  // namespace
}  // namespace memtrain::data
