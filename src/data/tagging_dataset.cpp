#include "data/tagging_dataset.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "core/error.h"

namespace memtrain::data {

namespace {

std::string lower(const std::string& s) {
  std::string out = s;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

TaggingDataset make_tagging_dataset(const BrownCorpus& corpus, std::int64_t max_vocabulary) {
  std::unordered_map<std::string, std::int64_t> word_counts, tag_counts;
  for (const TaggedSentence& s : corpus.sentences) {
    for (const std::string& w : s.words) ++word_counts[lower(w)];
    for (const std::string& t : s.tags) ++tag_counts[t];
  }
  TaggingDataset d;
  d.words = Vocabulary::from_counts(word_counts, max_vocabulary, {"<pad>", "<unk>"}, "<unk>");
  d.tags = Vocabulary::from_counts(tag_counts, 0, {}, "");
  d.word_ids.reserve(corpus.sentences.size());
  d.tag_ids.reserve(corpus.sentences.size());
  for (const TaggedSentence& s : corpus.sentences) {
    std::vector<std::int64_t> w, t;
    for (size_t i = 0; i < s.words.size(); ++i) {
      w.push_back(d.words.id(lower(s.words[i])));
      t.push_back(d.tags.id(s.tags[i]));
      if (w.back() == TaggingDataset::kUnknownWord) ++d.unknown_tokens;
    }
    d.max_length = std::max<std::int64_t>(d.max_length, static_cast<std::int64_t>(w.size()));
    d.word_ids.push_back(std::move(w));
    d.tag_ids.push_back(std::move(t));
  }
  return d;
}

TaggingDataset keep_sentences_up_to(TaggingDataset data, std::int64_t max_length) {
  std::vector<std::vector<std::int64_t>> words, tags;
  std::int64_t longest = 0, unknown = 0;
  size_t shortest = SIZE_MAX;
  for (size_t s = 0; s < data.word_ids.size(); ++s) {
    shortest = std::min(shortest, data.word_ids[s].size());
    if (static_cast<std::int64_t>(data.word_ids[s].size()) > max_length) continue;
    longest = std::max(longest, static_cast<std::int64_t>(data.word_ids[s].size()));
    unknown += std::count(data.word_ids[s].begin(), data.word_ids[s].end(), TaggingDataset::kUnknownWord);
    words.push_back(std::move(data.word_ids[s]));
    tags.push_back(std::move(data.tag_ids[s]));
  }
  if (words.empty()) {
    throw DataError(
        "maximum sentence length " + std::to_string(max_length) + " leaves no sentence" +
        (shortest == SIZE_MAX ? std::string() : "; the shortest has " + std::to_string(shortest) + " tokens"));
  }
  data.word_ids = std::move(words);
  data.tag_ids = std::move(tags);
  data.max_length = longest;
  data.unknown_tokens = unknown;
  return data;
}

}  // namespace memtrain::data
