#include "runtime/builtin_models/token_stages.h"

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/model/classification_loss.h"

namespace memtrain::runtime {

void check_token_model_sizes(const std::string& model, std::int64_t max_length, std::int64_t width, std::int64_t heads,
                             std::int64_t layers, double dropout) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) throw UsageError(model + ": " + what);
  };
  check(max_length >= 1, "max length " + std::to_string(max_length) + " must be >= 1");
  check(width >= 1 && width <= 8192, "width " + std::to_string(width) + " is out of range; expected 1..8192");
  check(heads >= 1 && width % heads == 0,
        "heads " + std::to_string(heads) + " must be >= 1 and divide the width " + std::to_string(width));
  check(layers >= 0 && layers <= 256, "layers " + std::to_string(layers) + " is out of range; expected 0..256");
  check(dropout >= 0 && dropout < 1, "dropout " + std::to_string(dropout) + " is out of range; expected [0, 1)");
}

TokenEmbeddingStage::TokenEmbeddingStage(std::int64_t vocabulary, std::int64_t max_length, std::int64_t width,
                                         double dropout, std::string model)
    : tokens_(register_module("tokens", torch::nn::Embedding(vocabulary, width))),
      positions_(register_module("positions", torch::nn::Embedding(max_length, width))), dropout_(dropout),
      model_(std::move(model)) {}

torch::Tensor TokenEmbeddingStage::forward(const torch::Tensor& ids, StepContext& ctx) {
  const int64_t length = ids.size(1);
  if (length > positions_->options.num_embeddings()) {
    throw Error(model_ + ": sequence of " + std::to_string(length) + " tokens is longer than the " +
                std::to_string(positions_->options.num_embeddings()) + " the model was built for");
  }
  const torch::Tensor where = torch::arange(length, ids.options());
  return step_dropout(tokens_(ids) + positions_(where), dropout_, ctx);
}

TokenClassifierStage::TokenClassifierStage(std::int64_t width, std::int64_t classes)
    : norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
      out_(register_module("out", torch::nn::Linear(width, classes))) {}

torch::Tensor TokenClassifierStage::forward(const torch::Tensor& x, StepContext& ctx) {
  return classification_loss(out_(norm_(x)), ctx);
}

}  // namespace memtrain::runtime
