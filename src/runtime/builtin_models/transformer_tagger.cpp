#include "runtime/builtin_models/transformer_tagger.h"

#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/builtin_models/token_stages.h"
#include "runtime/model/classification_loss.h"
#include "runtime/ops/attention_by_head.h"
#include "runtime/ops/recomputed_segment.h"

namespace memtrain::runtime {

namespace {

class AttentionStage : public StageModule {
 public:
  AttentionStage(const TransformerTaggerConfig& c)
      : norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})))),
        qkv_(register_module("qkv", torch::nn::Linear(c.width, 3 * c.width))),
        out_(register_module("out", torch::nn::Linear(c.width, c.width))), heads_(c.heads), dropout_(c.dropout) {}

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), dh = d / heads_;
    const torch::Tensor qkv = qkv_(norm_(x)).view({b, t, 3, heads_, dh}).permute({2, 0, 3, 1, 4});
    const torch::Tensor q = qkv[0] * (1.0 / std::sqrt(static_cast<double>(dh)));
    // One head at a time in every mode (ops/attention_by_head.h), so a
    // forward without grad, the plain layer and the variant that recomputes
    // the probabilities agree bit for bit; without grad nothing is kept.
    const bool keep_probabilities = ctx.variant == 0 && torch::GradMode::is_enabled();
    // Every mode draws the same mask: the probabilities' shape.
    const torch::Tensor keep = step_dropout_mask({b, heads_, t, t}, q.options(), dropout_, ctx);
    const torch::Tensor padding = ctx.key_padding.defined() ? ctx.key_padding.view({b, 1, 1, t}) : torch::Tensor();
    const torch::Tensor mixed =
        attention_by_head(q, qkv[1], qkv[2], padding, keep, 1.0 / (1.0 - dropout_), keep_probabilities)
            .transpose(1, 2)
            .reshape({b, t, d});
    return x + step_dropout(out_(mixed), dropout_, ctx);
  }

  std::vector<std::string> variant_names() const override { return {"recompute-softmax"}; }

 private:
  torch::nn::LayerNorm norm_;
  torch::nn::Linear qkv_, out_;
  int64_t heads_;
  double dropout_;
};

class FeedForwardStage : public StageModule, public Segment {
 public:
  FeedForwardStage(const TransformerTaggerConfig& c)
      : norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})))),
        up_(register_module("up", torch::nn::Linear(c.width, c.ff_width > 0 ? c.ff_width : 4 * c.width))),
        down_(register_module("down", torch::nn::Linear(c.ff_width > 0 ? c.ff_width : 4 * c.width, c.width))),
        dropout_(c.dropout) {}

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    const torch::Tensor h = up_(norm_(x));
    const torch::Tensor y = ctx.variant == 1 ? run_recomputed(*this, h, ctx.update_buffers) : run_segment(h, true);
    return x + step_dropout(y, dropout_, ctx);
  }

  // GELU and the down projection: the variant keeps only h and computes
  // gelu(h) again in the backward for the projection's weight gradient.
  torch::Tensor run_segment(const torch::Tensor& h, bool) override { return down_(torch::gelu(h)); }

  std::vector<std::string> variant_names() const override { return {"recompute-gelu"}; }

 private:
  torch::nn::LayerNorm norm_;
  torch::nn::Linear up_, down_;
  double dropout_;
};

void check_transformer(bool ok, const std::string& what) {
  if (!ok) throw UsageError("transformer: " + what);
}

}  // namespace

StagedModel make_transformer_tagger(const TransformerTaggerConfig& c) {
  check_transformer(c.vocabulary >= 2, "vocabulary " + std::to_string(c.vocabulary) + " must be >= 2");
  check_transformer(c.tags >= 2, "tag count " + std::to_string(c.tags) + " must be >= 2");
  check_token_model_sizes("transformer", c.max_length, c.width, c.heads, c.layers, c.dropout);

  std::vector<std::string> names{"embed"};
  std::vector<std::shared_ptr<StageModule>> stages{
      std::make_shared<TokenEmbeddingStage>(c.vocabulary, c.max_length, c.width, c.dropout, "transformer")};
  for (int64_t l = 0; l < c.layers; ++l) {
    names.push_back("attn" + std::to_string(l));
    stages.push_back(std::make_shared<AttentionStage>(c));
    names.push_back("ffn" + std::to_string(l));
    stages.push_back(std::make_shared<FeedForwardStage>(c));
  }
  names.push_back("classify");
  stages.push_back(std::make_shared<TokenClassifierStage>(c.width, c.tags));
  return StagedModel("transformer", std::move(names), std::move(stages));
}

}  // namespace memtrain::runtime
