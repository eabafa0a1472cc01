#include "runtime/builtin_models/gpt_decoder.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/builtin_models/token_stages.h"
#include "runtime/model/classification_loss.h"

namespace memtrain::runtime {

namespace {

class DecoderBlockStage : public StageModule {
 public:
  explicit DecoderBlockStage(const GptDecoderConfig& c)
      : attn_norm_(register_module("attn_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})))),
        qkv_(register_module("qkv", torch::nn::Linear(c.width, 3 * c.width))),
        attn_out_(register_module("attn_out", torch::nn::Linear(c.width, c.width))),
        ff_norm_(register_module("ff_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})))),
        up_(register_module("up", torch::nn::Linear(c.width, 4 * c.width))),
        down_(register_module("down", torch::nn::Linear(4 * c.width, c.width))), heads_(c.heads), dropout_(c.dropout) {}

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), dh = d / heads_;
    const torch::Tensor qkv = qkv_(attn_norm_(x)).view({b, t, 3, heads_, dh}).permute({2, 0, 3, 1, 4});
    const torch::Tensor q = qkv[0] * (1.0 / std::sqrt(static_cast<double>(dh)));
    torch::Tensor scores = torch::matmul(q, qkv[1].transpose(-2, -1));
    // Causal: position t sees positions <= t only. Padding sits after a
    // sentence's last word, so no counted position ever sees it.
    const torch::Tensor future = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu_(1);
    scores.masked_fill_(future, -std::numeric_limits<float>::infinity());
    const torch::Tensor probs = step_dropout(torch::softmax(scores, -1), dropout_, ctx);
    const torch::Tensor mixed = torch::matmul(probs, qkv[2]).transpose(1, 2).reshape({b, t, d});
    const torch::Tensor h = x + step_dropout(attn_out_(mixed), dropout_, ctx);
    return h + step_dropout(down_(torch::gelu(up_(ff_norm_(h)))), dropout_, ctx);
  }

 private:
  torch::nn::LayerNorm attn_norm_;
  torch::nn::Linear qkv_, attn_out_;
  torch::nn::LayerNorm ff_norm_;
  torch::nn::Linear up_, down_;
  int64_t heads_;
  double dropout_;
};

void check_gpt(bool ok, const std::string& what) {
  if (!ok) throw UsageError("gpt: " + what);
}

}  // namespace

StagedModel make_gpt_decoder(const GptDecoderConfig& c) {
  check_gpt(c.vocabulary >= 2, "vocabulary " + std::to_string(c.vocabulary) + " must be >= 2");
  check_token_model_sizes("gpt", c.max_length, c.width, c.heads, c.layers, c.dropout);

  std::vector<std::string> names{"embed"};
  std::vector<std::shared_ptr<StageModule>> stages{
      std::make_shared<TokenEmbeddingStage>(c.vocabulary, c.max_length, c.width, c.dropout, "gpt")};
  for (int64_t l = 0; l < c.layers; ++l) {
    names.push_back("block" + std::to_string(l));
    stages.push_back(std::make_shared<DecoderBlockStage>(c));
  }
  names.push_back("next_word");
  stages.push_back(std::make_shared<TokenClassifierStage>(c.width, c.vocabulary));
  return StagedModel("gpt", std::move(names), std::move(stages));
}

}  // namespace memtrain::runtime
