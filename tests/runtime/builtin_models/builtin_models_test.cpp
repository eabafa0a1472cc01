#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/builtin_models/resnet.h"
#include "runtime/builtin_models/resnet50.h"
#include "runtime/execution/executor.h"
#include "runtime/model/adam.h"
#include "runtime/training/trainer.h"
#include "support/tiny_tagging.h"

namespace memtrain::runtime {
namespace {

TEST(TransformerTagger, IsCutIntoTwoStagesPerLayer) {
  const StagedModel m = testing::tiny_tagger({62, 6, 40, 1}, 0.1, 3);
  ASSERT_EQ(m.size(), 8);
  EXPECT_EQ(m.stage_name(0), "embed");
  EXPECT_EQ(m.stage_name(1), "attn0");
  EXPECT_EQ(m.stage_name(2), "ffn0");
  EXPECT_EQ(m.stage_name(7), "classify");
  EXPECT_EQ(m.stage_param_bytes(0), (62 + 40) * 32 * 4);
}

TEST(ModelRegistry, RejectsUnknownModelsAndBadSizes) {
  try {
    make_model("lstm", {}, {10, 3, 8, 1});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown model 'lstm'; known: gpt, resnet, resnet50, transformer");
  }
  ModelSpec odd;
  odd.width = 30;
  odd.heads = 4;
  EXPECT_THROW(make_model("transformer", odd, {10, 3, 8, 1}), UsageError);
  // Both token models check their shared sizes alike, each naming itself.
  for (const char* name : {"transformer", "gpt"}) {
    try {
      make_model(name, odd, {10, 3, 8, 1});
      ADD_FAILURE() << name;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(name) + ": heads 4 must be >= 1 and divide the width 30");
    }
  }
}

StepContext context(const torch::Tensor& targets) {
  StepContext ctx;
  ctx.targets = targets;
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  return ctx;
}

TEST(ResNet, AcceptsAnyImageSize) {
  ResNetConfig c;
  c.width = 4;
  c.blocks_per_group = 1;
  StagedModel m = make_resnet(c);
  EXPECT_EQ(m.size(), 5);
  for (int side : {28, 61, 112}) {
    torch::Tensor x = torch::randn({2, 1, side, side});
    StepContext ctx = context(torch::tensor({3, 7}));
    for (int i = 0; i < m.size(); ++i) x = m.stage(i).forward(x, ctx);
    EXPECT_EQ(x.dim(), 0) << side;
    EXPECT_EQ(ctx.counted, 2);
  }
}

// ResNet-50's layout: a stem, 3 + 4 + 6 + 3 bottleneck blocks, the
// classifier; the stem and each group's first block quarter or halve H x W.
TEST(ResNet50, HasSixteenBottleneckBlocksAndAcceptsAnyImageSize) {
  ResNet50Config c;
  c.in_channels = 1;
  c.classes = 10;
  c.width = 2;
  StagedModel m = make_resnet50(c);
  ASSERT_EQ(m.size(), 18);
  EXPECT_EQ(m.stage_name(0), "stem");
  EXPECT_EQ(m.stage_name(4), "block1.0");
  EXPECT_EQ(m.stage_name(16), "block3.2");
  EXPECT_EQ(m.stage_name(17), "classify");
  for (int side : {32, 45}) {
    torch::Tensor x = torch::randn({2, 1, side, side});
    StepContext ctx = context(torch::tensor({3, 7}));
    std::vector<std::int64_t> sides;
    for (int i = 0; i < m.size(); ++i) {
      x = m.stage(i).forward(x, ctx);
      if (x.dim() == 4) sides.push_back(x.size(3));
    }
    EXPECT_EQ(x.dim(), 0) << side;
    const std::int64_t s1 = (side + 1) / 2, s2 = (s1 + 1) / 2;  // stem convolution, max pooling
    EXPECT_EQ(sides.front(), s2) << side;
    EXPECT_EQ(sides[1], s2) << side;
    EXPECT_EQ(sides.back(), (((s2 + 1) / 2 + 1) / 2 + 1) / 2) << side;
  }
  // The widest stage's output: 4 x 8 x width channels.
  EXPECT_EQ(m.stage(16).parameters()[0].size(1), 4 * 8 * 2);

  ResNet50Config wide = c;
  wide.width = 300;
  try {
    make_resnet50(wide);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "resnet50: width 300 is out of range; expected 1..256");
  }
  ModelSpec layers;
  layers.layers = 2;
  EXPECT_THROW(make_model("resnet50", layers, {0, 10, 0, 1}), UsageError);
}

// Batch norm's running statistics must not see a recomputation.
TEST(ResNet, RecomputationLeavesRunningStatisticsAsAPlainStepDoes) {
  auto run = [](const Schedule& s) {
    CpuDeviceMemory memory;
    auto scope = memory.activate();
    torch::manual_seed(2);
    ResNetConfig c;
    c.width = 4;
    c.blocks_per_group = 1;
    StagedModel m = make_resnet(c);
    Batch b;
    b.input = torch::randn({4, 1, 20, 20});
    b.targets = torch::tensor({1, 2, 3, 4});
    b.signature = Signature::of_shape({4, 1, 20, 20});
    StepContext ctx = context(b.targets);
    Executor(m, memory).run(s, b, ctx);
    std::vector<torch::Tensor> buffers;
    for (int i = 0; i < m.size(); ++i) {
      for (const auto& t : m.stage(i).buffers()) buffers.push_back(t.clone());
    }
    return buffers;
  };
  const auto plain = run(plan::schedule_with_recompute(std::vector<char>(5, 0)));
  const auto checkpointed = run(plan::schedule_for_collection(5));
  ASSERT_EQ(plain.size(), checkpointed.size());
  ASSERT_FALSE(plain.empty());
  for (size_t k = 0; k < plain.size(); ++k) EXPECT_TRUE(torch::equal(plain[k], checkpointed[k])) << k;
}

// A user's own module: anything with forward(Tensor) -> Tensor.
struct DenseReluImpl : torch::nn::Module {
  DenseReluImpl(int64_t in, int64_t out) : linear(register_module("linear", torch::nn::Linear(in, out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::relu(linear(x)); }
  torch::nn::Linear linear;
};
TORCH_MODULE(DenseRelu);

TEST(StagedModel, UsersBuildChainsFromTheirOwnModules) {
  using torch::nn::AnyModule;
  auto build = [] {
    return StagedModel::from_modules("mlp", {AnyModule(DenseRelu(8, 32)), AnyModule(DenseRelu(32, 32))},
                                     AnyModule(torch::nn::Linear(32, 3)));
  };
  StagedModel m = build();
  ASSERT_EQ(m.size(), 3);
  EXPECT_EQ(m.stage_name(2), "loss");
  EXPECT_EQ(m.parameter_count(), 8 * 32 + 32 + 32 * 32 + 32 + 32 * 3 + 3);

  // It trains like any other chain: a separable 3-class problem.
  CpuDeviceMemory memory;
  auto scope = memory.activate();
  torch::manual_seed(0);
  StagedModel model = build();
  Adam adam(model.parameters(), AdamOptions{0.01});
  Batch b;
  b.input = torch::randn({64, 8});
  b.targets = b.input.slice(1, 0, 3).argmax(1);
  b.signature = Signature::of_shape({64, 8});
  Executor ex(model, memory);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    StepContext ctx = context(b.targets);
    const double loss = ex.run(plan::schedule_with_recompute({1, 1, 0}), b, ctx).loss;
    adam.step();
    adam.zero_grad();
    (step == 0 ? first : last) = loss;
  }
  EXPECT_LT(last, 0.5 * first);
}

TEST(Adam, MatchesLibTorchsAdam) {
  torch::manual_seed(1);
  torch::Tensor w1 = torch::randn({5, 3}, torch::requires_grad());
  torch::Tensor w2 = w1.detach().clone().requires_grad_(true);
  const torch::Tensor x = torch::randn({7, 5});
  Adam ours({w1}, AdamOptions{0.05});
  torch::optim::Adam theirs({w2}, torch::optim::AdamOptions(0.05));
  for (int step = 0; step < 5; ++step) {
    torch::matmul(x, w1).pow(2).sum().backward();
    ours.step();
    ours.zero_grad();
    theirs.zero_grad();
    torch::matmul(x, w2).pow(2).sum().backward();
    theirs.step();
  }
  EXPECT_TRUE(torch::allclose(w1, w2, 1e-5, 1e-6)) << (w1 - w2).abs().max().item<float>();
}

TEST(Adam, AllocatesGradientsAndStateUpFrontAndNothingOnTheHostDuringAStep) {
  CpuDeviceMemory memory;
  auto scope = memory.activate();
  torch::Tensor w = torch::zeros({10000}, torch::requires_grad());
  const Bytes weights = memory.live();
  Adam adam({w}, AdamOptions{});
  EXPECT_EQ(memory.live(), weights * (2 + Adam::kSlots)) << "weights, gradients, two moments";
  w.mutable_grad().fill_(1);
  const Bytes resident = memory.live();
  memory.reset_peak();
  adam.step();
  EXPECT_EQ(memory.live(), resident);
  EXPECT_EQ(memory.peak(), resident) << "one fused pass on the host allocates nothing";
  EXPECT_LT(adam.update_temp_bytes(), weights) << "and the trainer reserves no weight-sized temporary for it";
  EXPECT_NE(w.detach().sum().item<float>(), 0) << "the step moved the weights";
}

TEST(Adam, TheHostUpdateGivesTheSameBitsWhateverTheThreads) {
  torch::manual_seed(4);
  const std::int64_t n = 3 * (1 << 18) + 17;  // split over up to 3 threads, unevenly
  const torch::Tensor w = torch::randn({n}), m = torch::randn({n}) * 0.1, v = torch::rand({n}) * 0.01;
  const torch::Tensor g = torch::randn({n});
  const Adam adam({}, AdamOptions{});
  const int threads = at::get_num_threads();
  std::vector<torch::Tensor> results;
  for (int t : {1, 3}) {
    at::set_num_threads(t);
    torch::Tensor wt = w.clone(), mt = m.clone(), vt = v.clone();
    adam.apply(wt, mt, vt, g, 5);
    results.push_back(torch::cat({wt, mt, vt}));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(results[0], results[1]));
  EXPECT_FALSE(torch::equal(results[0].slice(0, 0, n), w)) << "the update changed the weights";
}

TEST(Adam, TheVectorizedHostUpdateGivesTheScalarLoopsBits) {
  torch::manual_seed(5);
  const std::int64_t n = 1000 + 13;  // a tail past every vector width
  const torch::Tensor w = torch::randn({n}), m = torch::randn({n}) * 0.1, v = torch::rand({n}) * 0.01;
  const torch::Tensor g = torch::randn({n});
  const AdamOptions o{1e-2, 0.9, 0.999, 1e-8, 0.1};
  const long t = 7;
  // The update one element at a time, in the float operations Adam documents.
  torch::Tensor we = w.clone(), me = m.clone(), ve = v.clone();
  const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t);
  const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
  const float rest1 = static_cast<float>(1 - o.beta1), rest2 = static_cast<float>(1 - o.beta2);
  const float sqrt_bias2 = static_cast<float>(std::sqrt(bias2)), eps = static_cast<float>(o.eps);
  const float step = static_cast<float>(o.lr / bias1), decay = static_cast<float>(1 - o.lr * o.weight_decay);
  float *wp = we.data_ptr<float>(), *mp = me.data_ptr<float>(), *vp = ve.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    volatile float mi = b1 * mp[i] + rest1 * gp[i];  // volatile: each operation rounded on its own
    volatile float vi = b2 * vp[i] + rest2 * (gp[i] * gp[i]);
    volatile float denom = std::sqrt(static_cast<float>(vi)) / sqrt_bias2 + eps;
    wp[i] = wp[i] * decay - step * (mi / denom);
    mp[i] = mi;
    vp[i] = vi;
  }
  const Adam adam({}, o);
  torch::Tensor wi = w.clone(), mi = m.clone(), vi = v.clone();
  adam.apply(wi, mi, vi, g, t);
  EXPECT_TRUE(torch::equal(wi, we) && torch::equal(mi, me) && torch::equal(vi, ve))
      << "in place: " << (wi - we).abs().max().item<float>();
  // Weights in place, moments into tensors of their own: the same bits.
  const torch::Tensor m0 = m.clone(), v0 = v.clone();
  torch::Tensor wm = w.clone(), m_out = torch::empty_like(m), v_out = torch::empty_like(v);
  adam.apply_into(wm, m_out, v_out, wm, m, v, g, t);
  EXPECT_TRUE(torch::equal(wm, we) && torch::equal(m_out, me) && torch::equal(v_out, ve));
  EXPECT_TRUE(torch::equal(m, m0) && torch::equal(v, v0)) << "the moments' inputs untouched";
}

TEST(Adam, AnUpdateIntoNewTensorsEqualsTheUpdateInPlaceAndLeavesItsInputs) {
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({1000}), m = torch::randn({1000}) * 0.1, v = torch::rand({1000}) * 0.01;
  const torch::Tensor g = torch::randn({1000});
  const torch::Tensor w0 = w.clone(), m0 = m.clone(), v0 = v.clone();
  const Adam adam({}, AdamOptions{1e-2, 0.9, 0.999, 1e-8, 0.1});
  torch::Tensor w_out = torch::empty_like(w), m_out = torch::empty_like(m), v_out = torch::empty_like(v);
  adam.apply_into(w_out, m_out, v_out, w, m, v, g, 3);
  EXPECT_TRUE(torch::equal(w, w0) && torch::equal(m, m0) && torch::equal(v, v0)) << "inputs untouched";
  torch::Tensor w_in = w.clone(), m_in = m.clone(), v_in = v.clone();
  adam.apply(w_in, m_in, v_in, g, 3);
  EXPECT_TRUE(torch::equal(w_out, w_in));
  EXPECT_TRUE(torch::equal(m_out, m_in));
  EXPECT_TRUE(torch::equal(v_out, v_in));
  // The same update op by op, as a GPU runs it (strided tensors take that path on the host too).
  torch::Tensor ws = torch::stack({w, w}, 1).select(1, 0), ms = torch::stack({m, m}, 1).select(1, 0);
  torch::Tensor vs = torch::stack({v, v}, 1).select(1, 0);
  ASSERT_FALSE(ws.is_contiguous());
  adam.apply(ws, ms, vs, g, 3);
  EXPECT_TRUE(torch::allclose(ws, w_in, 1e-6, 1e-7)) << (ws - w_in).abs().max().item<float>();
  EXPECT_TRUE(torch::allclose(vs, v_in, 1e-6, 1e-9));
}

}  // namespace
}  // namespace memtrain::runtime
