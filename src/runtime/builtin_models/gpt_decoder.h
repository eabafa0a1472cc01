// A GPT-style decoder for next-word prediction, cut into stages: embedding,
// one stage per decoder block (causal self-attention and feed-forward,
// pre-norm, residuals inside the stage), then the vocabulary projection and
// loss. Whole blocks are the stages because weight swapping moves weights
// stage by stage: a block is the natural unit of a layer pack.
#pragma once

#include <cstdint>

#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

struct GptDecoderConfig {
  std::int64_t vocabulary = 0;  // word ids, <pad> = 0 included; also the output classes
  std::int64_t max_length = 0;  // longest sequence the position table covers
  std::int64_t width = 256;     // model dimension
  std::int64_t heads = 4;       // attention heads; must divide width
  std::int64_t layers = 6;      // decoder blocks
  double dropout = 0.1;
};

StagedModel make_gpt_decoder(const GptDecoderConfig& config);

}  // namespace memtrain::runtime
