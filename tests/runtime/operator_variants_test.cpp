#include <gtest/gtest.h>
#include <torch/torch.h>

#include "plan/schedule_builders.h"
#include "runtime/chain_measurement.h"
#include "runtime/models/model_registry.h"
#include "runtime/models/resnet.h"
#include "runtime/rng_snapshot.h"
#include "support/rig.h"

namespace memtrain::runtime {
namespace {

// One stage forward and backward as `variant`: output, input gradient and
// weight gradients, from the same input, upstream gradient and generator.
struct Pass {
  torch::Tensor output, input_grad;
  std::vector<torch::Tensor> weight_grads;
};

Pass run_stage(StageModule& stage, const torch::Tensor& input, const torch::Tensor& key_padding, int variant,
               std::uint64_t seed) {
  for (auto& p : stage.parameters()) p.mutable_grad() = torch::Tensor();
  StepContext ctx;
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  ctx.key_padding = key_padding;
  ctx.update_buffers = false;
  ctx.variant = variant;
  const torch::Tensor x = input.detach().requires_grad_(true);
  const torch::Tensor y = stage.forward(x, ctx);
  torch::manual_seed(seed + 1);
  const torch::Tensor upstream = torch::randn_like(y);
  torch::autograd::backward({y}, {upstream});
  Pass p{y.detach(), x.grad(), {}};
  for (auto& w : stage.parameters()) p.weight_grads.push_back(w.grad().defined() ? w.grad().clone() : torch::Tensor());
  return p;
}

void expect_identical(const Pass& plain, const Pass& variant, const std::string& what) {
  EXPECT_TRUE(torch::equal(plain.output, variant.output)) << what << ": output";
  EXPECT_TRUE(torch::equal(plain.input_grad, variant.input_grad))
      << what << ": input gradient, max difference "
      << (plain.input_grad - variant.input_grad).abs().max().item<double>();
  ASSERT_EQ(plain.weight_grads.size(), variant.weight_grads.size());
  for (size_t k = 0; k < plain.weight_grads.size(); ++k) {
    EXPECT_TRUE(torch::equal(plain.weight_grads[k], variant.weight_grads[k])) << what << ": weight gradient " << k;
  }
}

StagedModel tagger(double dropout) {
  torch::manual_seed(4);
  ModelSpec spec;
  spec.layers = 1;
  spec.width = 16;
  spec.heads = 2;
  spec.dropout = dropout;
  return make_model("transformer", spec, {30, 5, 12, 1});
}

TEST(OperatorVariants, AttentionRecomputingItsSoftmaxGivesTheSameGradients) {
  for (double dropout : {0.0, 0.2}) {
    StagedModel m = tagger(dropout);
    ASSERT_EQ(m.stage_variant_names(1), (std::vector<std::string>{"recompute-softmax"}));
    torch::manual_seed(5);
    const torch::Tensor x = torch::randn({3, 12, 16});
    torch::Tensor padding = torch::zeros({3, 12}, torch::kBool);
    padding.index_put_({1, torch::indexing::Slice(7)}, true);  // a shorter sentence
    const Pass plain = run_stage(m.stage(1), x, padding, 0, 9);
    const Pass variant = run_stage(m.stage(1), x, padding, 1, 9);
    expect_identical(plain, variant, "attention, dropout " + std::to_string(dropout));
  }
}

TEST(OperatorVariants, FeedForwardRecomputingItsGeluGivesTheSameGradients) {
  StagedModel m = tagger(0.1);
  ASSERT_EQ(m.stage_variant_names(2), (std::vector<std::string>{"recompute-gelu"}));
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({2, 12, 16});
  expect_identical(run_stage(m.stage(2), x, {}, 0, 3), run_stage(m.stage(2), x, {}, 1, 3), "feed-forward");
}

TEST(OperatorVariants, ResNetBlockRecomputingItsSecondConvolutionGivesTheSameGradients) {
  torch::manual_seed(7);
  ResNetConfig c;
  c.width = 4;
  c.blocks_per_group = 1;
  StagedModel m = make_resnet(c);
  ASSERT_EQ(m.stage_variant_names(2), (std::vector<std::string>{"recompute-conv2"}));
  const torch::Tensor x = torch::randn({3, 4, 10, 10});
  for (int stage : {1, 2}) {  // without and with a strided shortcut
    const torch::Tensor in = stage == 1 ? x : torch::randn({3, 4, 10, 10});
    expect_identical(run_stage(m.stage(stage), in, {}, 0, 1), run_stage(m.stage(stage), in, {}, 1, 1),
                     "block " + std::to_string(stage));
  }
}

// What the variants are for: measured by the executor, each keeps less.
TEST(OperatorVariants, EachVariantKeepsLessForItsBackward) {
  testing::Rig rig(0.1);
  const int n = rig.model->size();
  const Batch batch = rig.batch(2);
  std::vector<predict::ChainSample> samples;
  for (int round : {0, 1}) {
    std::vector<int> variants(n, 0);
    for (int i = 0; i < n; ++i) variants[i] = round ? static_cast<int>(rig.model->stage_variant_names(i).size()) : 0;
    samples.push_back(sample_execution(rig.run(plan::schedule_for_collection(n, variants), batch), n, 0));
    rig.adam->zero_grad();
  }
  const Chain chain = chain_from_samples(samples, stage_constants(*rig.model, Adam::kSlots));
  int with_variants = 0;
  for (int i = 0; i < n; ++i) {
    const Stage& s = chain.stages[i];
    ASSERT_EQ(s.variant_count(), 1 + static_cast<int>(rig.model->stage_variant_names(i).size())) << s.name;
    for (int v = 1; v < s.variant_count(); ++v, ++with_variants) {
      EXPECT_LT(s.variant(v).saved_bytes, s.saved_bytes) << s.name << " " << s.variant(v).name;
      EXPECT_GE(s.variant(v).saved_bytes, chain.activation_bytes(i + 1)) << "the output is still kept";
    }
  }
  EXPECT_EQ(with_variants, 4);  // two layers: attention and feed-forward each
}

}  // namespace
}  // namespace memtrain::runtime
