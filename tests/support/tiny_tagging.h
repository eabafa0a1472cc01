// A small learnable tagging task (the tag is a function of the word) and a small Transformer for it: fast enough to
// train many steps in a unit test, with sentence lengths that vary like Brown's.
#pragma once

#include <memory>

#include "data/seeded_order.h"
#include "data/tagging_dataset.h"
#include "runtime/builtin_models/gpt_decoder.h"
#include "runtime/builtin_models/model_registry.h"

namespace memtrain::testing {

inline std::shared_ptr<data::TaggingDataset> tiny_tagging(int sentences = 256, std::uint64_t seed = 11) {
  auto d = std::make_shared<data::TaggingDataset>();
  d->words = data::Vocabulary::from_counts({}, 0, {"<pad>", "<unk>"}, "<unk>");
  data::SeededRandom rng(seed);
  for (int s = 0; s < sentences; ++s) {
    const std::int64_t length = 2 + static_cast<std::int64_t>(rng.below(rng.below(4) == 0 ? 48 : 16));
    std::vector<std::int64_t> w, t;
    for (std::int64_t k = 0; k < length; ++k) {
      w.push_back(2 + static_cast<std::int64_t>(rng.below(60)));
      t.push_back(w.back() % 6);
    }
    d->max_length = std::max(d->max_length, length);
    d->word_ids.push_back(w);
    d->tag_ids.push_back(t);
  }
  return d;
}

inline runtime::DataShape tiny_shape(const data::TaggingDataset& d) { return {62, 6, d.max_length, 1}; }

inline runtime::StagedModel tiny_tagger(const runtime::DataShape& shape, double dropout = 0.1, int layers = 2) {
  runtime::ModelSpec spec;
  spec.layers = layers;
  spec.width = 32;
  spec.heads = 2;
  spec.dropout = dropout;
  return runtime::make_model("transformer", spec, shape);
}

// One tiny_tagging() set, made once, for the runs of a test file.
inline std::shared_ptr<data::TaggingDataset> shared_tiny_tagging() {
  static const std::shared_ptr<data::TaggingDataset> data = tiny_tagging();
  return data;
}

// A GPT decoder over tiny_tagging's 62 words (next-word prediction), with dropout.
inline runtime::StagedModel tiny_gpt(std::int64_t max_length, std::int64_t width, std::int64_t heads, int layers) {
  runtime::GptDecoderConfig c;
  c.vocabulary = 62;
  c.max_length = max_length;
  c.width = width;
  c.heads = heads;
  c.layers = layers;
  c.dropout = 0.1;
  return runtime::make_gpt_decoder(c);
}

}  // namespace memtrain::testing
