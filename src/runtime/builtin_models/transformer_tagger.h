// A Transformer encoder for token classification (part-of-speech tagging),
// cut into stages: embedding, then per layer an attention stage and a
// feed-forward stage (pre-norm, residual inside the stage), then classifier
// and loss. Splitting each layer in two gives the planners a finer chain.
#pragma once

#include <cstdint>

#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

struct TransformerTaggerConfig {
  std::int64_t vocabulary = 0;  // word ids, <pad> = 0 included
  std::int64_t tags = 0;        // output classes
  std::int64_t max_length = 0;  // longest sequence the position table covers
  std::int64_t width = 128;     // model dimension
  std::int64_t heads = 4;       // attention heads; must divide width
  std::int64_t layers = 6;      // encoder layers (two stages each)
  std::int64_t ff_width = 0;    // feed-forward hidden width; 0 = 4 x width
  double dropout = 0.1;
};

StagedModel make_transformer_tagger(const TransformerTaggerConfig& config);

}  // namespace memtrain::runtime
