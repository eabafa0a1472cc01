// The stages every token model starts and ends with: word and position
// embeddings (with dropout), and a normalised projection to classes plus
// the loss. The tagger projects to tags, the gpt decoder to next words.
#pragma once

#include <cstdint>
#include <string>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "runtime/model/stage_module.h"

namespace memtrain::runtime {

// The sizes every token model shares, checked in this order: max length,
// width, heads (which must divide the width), layers and dropout. Throws
// UsageError "MODEL: ..." naming the first that is out of range.
void check_token_model_sizes(const std::string& model, std::int64_t max_length, std::int64_t width, std::int64_t heads,
                             std::int64_t layers, double dropout);

class TokenEmbeddingStage : public StageModule {
 public:
  // `model` names the model in the error for a sequence longer than `max_length`.
  TokenEmbeddingStage(std::int64_t vocabulary, std::int64_t max_length, std::int64_t width, double dropout,
                      std::string model);
  torch::Tensor forward(const torch::Tensor& ids, StepContext& ctx) override;

 private:
  torch::nn::Embedding tokens_, positions_;
  double dropout_;
  std::string model_;
};

class TokenClassifierStage : public StageModule {
 public:
  TokenClassifierStage(std::int64_t width, std::int64_t classes);
  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override;

 private:
  torch::nn::LayerNorm norm_;
  torch::nn::Linear out_;
};

}  // namespace memtrain::runtime
