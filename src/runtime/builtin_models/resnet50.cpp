#include "runtime/builtin_models/resnet50.h"

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/builtin_models/pooled_classifier_stage.h"
#include "runtime/ops/convolution_backward.h"
#include "runtime/ops/norm_relu_conv.h"
#include "runtime/ops/norm_relu_max_pool.h"
#include "runtime/ops/step_batch_norm.h"

namespace memtrain::runtime {

namespace {

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// Variants apply to a training forward with grad; any other runs plain.
bool runs_variant(const StepContext& ctx, int variant) {
  return ctx.variant == variant && ctx.training && torch::GradMode::is_enabled();
}

// As in the other models: one tensor per statement and ReLU in place, so
// that without grad each intermediate dies as soon as the next exists.
class ImageStemStage : public StageModule {
 public:
  ImageStemStage(int64_t in, int64_t out)
      : conv_(register_module("conv", conv(in, out, 7, 2))),
        norm_(register_module("norm", std::make_shared<StepBatchNorm>(out))) {}

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    const torch::Tensor c = conv_(x);
    if (runs_variant(ctx, kPoolKeepsOffsets))
      return norm_relu_max_pool_keeping_offsets(*norm_, kPool, c, ctx.update_buffers);
    torch::Tensor h = norm_->forward(c, ctx.training, ctx.update_buffers);
    h.relu_();
    return at::max_pool2d(h, {kPool.kernel, kPool.kernel}, {kPool.stride, kPool.stride},
                          {kPool.padding, kPool.padding});
  }

  std::vector<std::string> variant_names() const override { return {"pool-keeps-offsets"}; }

 private:
  static constexpr int kPoolKeepsOffsets = 1;
  static constexpr PoolWindow kPool{3, 2, 1};
  torch::nn::Conv2d conv_;
  std::shared_ptr<StepBatchNorm> norm_;
};

class BottleneckStage : public StageModule {
 public:
  BottleneckStage(int64_t in, int64_t mid, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", conv(in, mid, 1, 1))),
        norm1_(register_module("norm1", std::make_shared<StepBatchNorm>(mid))),
        conv2_(register_module("conv2", conv(mid, mid, 3, stride))),
        norm2_(register_module("norm2", std::make_shared<StepBatchNorm>(mid))),
        conv3_(register_module("conv3", conv(mid, out, 1, 1))),
        norm3_(register_module("norm3", std::make_shared<StepBatchNorm>(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module("shortcut", conv(in, out, 1, stride));
      shortcut_norm_ = register_module("shortcut_norm", std::make_shared<StepBatchNorm>(out));
    }
  }

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    const bool training = ctx.training, update = ctx.update_buffers;
    if (runs_variant(ctx, kKeepNormInputs)) {
      // The last ReLU stays autograd's, which frees the incoming gradient
      // once it has read it (a custom function's backward cannot).
      return KeepingNormInputs::apply(x, torch::TensorList(weights()), reinterpret_cast<int64_t>(this), update).relu_();
    }
    torch::Tensor h = conv1_(x);
    if (runs_variant(ctx, kRebuildRelus)) {
      h = norm_relu_conv_keeping_input(*norm1_, conv2_, h, update);
      h = norm_relu_conv_keeping_input(*norm2_, conv3_, h, update);
    } else {
      h = norm1_->forward(h, training, update);
      h.relu_();
      h = conv2_(h);
      h = norm2_->forward(h, training, update);
      h.relu_();
      h = conv3_(h);
    }
    h = norm3_->forward(h, training, update);
    if (shortcut_) {
      torch::Tensor skip = shortcut_(x);
      h.add_(shortcut_norm_->forward(skip, training, update));
    } else {
      h.add_(x);
    }
    return h.relu_();
  }

  std::vector<std::string> variant_names() const override {
    return {"recompute-norm-relu", "recompute-norm-relu-conv3"};
  }

 private:
  static constexpr int kRebuildRelus = 1;
  static constexpr int kKeepNormInputs = 2;

  // The weights in the order the written-out backward returns their gradients.
  std::vector<torch::Tensor> weights() const {
    std::vector<torch::Tensor> w{conv1_->weight, norm1_->weight(), norm1_->bias(),   conv2_->weight, norm2_->weight(),
                                 norm2_->bias(), conv3_->weight,   norm3_->weight(), norm3_->bias()};
    if (shortcut_) {
      for (const torch::Tensor& t : {shortcut_->weight, shortcut_norm_->weight(), shortcut_norm_->bias()}) {
        w.push_back(t);
      }
    }
    return w;
  }

  // What the "recompute-norm-relu-conv3" variant keeps besides the block's
  // input and output: the first two batch norms' inputs, the shortcut's
  // convolution output, and the statistics of the norms whose inputs it
  // does not keep.
  struct Kept {
    torch::Tensor c1, c2, shortcut;
    NormRun norm3, shortcut_norm;
  };

  // The plain forward's kernels up to the sum before the last ReLU, one
  // tensor at a time, without grad.
  torch::Tensor forward_keeping(const torch::Tensor& x, bool update_buffers, Kept& kept) {
    kept.c1 = conv1_(x);
    {
      const torch::Tensor r1 = norm1_->run(kept.c1, update_buffers).output.relu_();
      kept.c2 = conv2_(r1);
    }
    torch::Tensor c3;
    {
      const torch::Tensor r2 = norm2_->run(kept.c2, update_buffers).output.relu_();
      c3 = conv3_(r2);
    }
    kept.norm3 = norm3_->run(c3, update_buffers);
    c3 = torch::Tensor();
    torch::Tensor h = std::move(kept.norm3.output);
    if (shortcut_) {
      kept.shortcut = shortcut_(x);
      kept.shortcut_norm = shortcut_norm_->run(kept.shortcut, update_buffers);
      h.add_(kept.shortcut_norm.output);
      kept.shortcut_norm.output = torch::Tensor();
    } else {
      h.add_(x);
    }
    return h;
  }

  // The kernels plain autograd runs, in its order, on the same data; each
  // rebuilt tensor is freed once the last kernel that reads it has run.
  // `g` is the gradient at the sum, which the skip gets too.
  std::vector<torch::Tensor> backward_keeping(const torch::Tensor& x, const Kept& kept, const torch::Tensor& g,
                                              bool input_grad) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads(1 + weights().size());
    NormRun n2 = norm_forward(kept.c2, norm2_->weight(), norm2_->bias());
    torch::Tensor r2 = std::move(n2.output).relu_();
    torch::Tensor g_c2;
    {
      torch::Tensor g_c3;
      {
        const torch::Tensor c3 = conv3_(r2);
        std::tie(g_c3, grads[8], grads[9]) = norm_backward(kept.norm3, c3, g, norm3_->weight());
      }
      ConvolutionGrads c = conv2d_backward(conv3_, g_c3, r2, true, true);
      grads[7] = c.weight;
      g_c3 = torch::Tensor();
      const torch::Tensor g_b2 = at::threshold_backward(c.input, r2, 0);
      r2 = torch::Tensor();
      std::tie(g_c2, grads[5], grads[6]) = norm_backward(n2, kept.c2, g_b2, norm2_->weight());
    }
    torch::Tensor g_c1;
    {
      NormRun n1 = norm_forward(kept.c1, norm1_->weight(), norm1_->bias());
      torch::Tensor r1 = std::move(n1.output).relu_();
      ConvolutionGrads c = conv2d_backward(conv2_, g_c2, r1, true, true);
      grads[4] = c.weight;
      g_c2 = torch::Tensor();
      const torch::Tensor g_b1 = at::threshold_backward(c.input, r1, 0);
      r1 = torch::Tensor();
      std::tie(g_c1, grads[2], grads[3]) = norm_backward(n1, kept.c1, g_b1, norm1_->weight());
    }
    ConvolutionGrads c = conv2d_backward(conv1_, g_c1, x, input_grad, true);
    grads[1] = c.weight;
    torch::Tensor g_x = c.input;
    if (shortcut_) {
      torch::Tensor g_s;
      std::tie(g_s, grads[11], grads[12]) =
          norm_backward(kept.shortcut_norm, kept.shortcut, g, shortcut_norm_->weight());
      ConvolutionGrads s = conv2d_backward(shortcut_, g_s, x, input_grad, true);
      grads[10] = s.weight;
      if (input_grad) g_x.add_(s.input);
    } else if (input_grad) {
      g_x.add_(g);
    }
    grads[0] = input_grad ? g_x : torch::Tensor();
    return grads;
  }

  class KeepingNormInputs : public torch::autograd::Function<KeepingNormInputs> {
   public:
    // The weights are inputs only so that autograd hands their gradients to backward.
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 torch::TensorList /*weights*/, int64_t block, bool update_buffers) {
      auto* self = reinterpret_cast<BottleneckStage*>(block);
      Kept kept;
      const torch::Tensor sum = self->forward_keeping(x, update_buffers, kept);
      ctx->save_for_backward({x, kept.c1, kept.c2, kept.shortcut, kept.norm3.mean, kept.norm3.invstd,
                              kept.norm3.reserve, kept.shortcut_norm.mean, kept.shortcut_norm.invstd,
                              kept.shortcut_norm.reserve});
      ctx->saved_data["block"] = block;
      ctx->saved_data["norm3_impl"] = kept.norm3.impl;
      ctx->saved_data["shortcut_norm_impl"] = kept.shortcut_norm.impl;
      return sum;
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::tensor_list grads) {
      auto* self = reinterpret_cast<BottleneckStage*>(ctx->saved_data["block"].toInt());
      const auto s = ctx->get_saved_variables();
      Kept kept;
      kept.c1 = s[1];
      kept.c2 = s[2];
      kept.shortcut = s[3];
      kept.norm3 = {torch::Tensor(), s[4], s[5], s[6], ctx->saved_data["norm3_impl"].toInt()};
      kept.shortcut_norm = {torch::Tensor(), s[7], s[8], s[9], ctx->saved_data["shortcut_norm_impl"].toInt()};
      torch::autograd::tensor_list out = self->backward_keeping(s[0], kept, grads[0], ctx->needs_input_grad(0));
      out.resize(out.size() + 2);  // the block and update_buffers arguments
      return out;
    }
  };

  torch::nn::Conv2d conv1_;
  std::shared_ptr<StepBatchNorm> norm1_;
  torch::nn::Conv2d conv2_;
  std::shared_ptr<StepBatchNorm> norm2_;
  torch::nn::Conv2d conv3_;
  std::shared_ptr<StepBatchNorm> norm3_;
  torch::nn::Conv2d shortcut_{nullptr};
  std::shared_ptr<StepBatchNorm> shortcut_norm_;
};

}  // namespace

StagedModel make_resnet50(const ResNet50Config& c) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw UsageError("resnet50: " + what);
  };
  check(c.in_channels >= 1, "input channels must be >= 1");
  check(c.classes >= 2, "classes must be >= 2");
  check(c.width >= 1 && c.width <= 256, "width " + std::to_string(c.width) + " is out of range; expected 1..256");
  check(!c.blocks_per_group.empty() && c.blocks_per_group.size() <= 6, "expected 1..6 groups of blocks");
  for (std::int64_t b : c.blocks_per_group) {
    check(b >= 1 && b <= 64, "blocks per group " + std::to_string(b) + " is out of range; expected 1..64");
  }

  std::vector<std::string> names{"stem"};
  std::vector<std::shared_ptr<StageModule>> stages{std::make_shared<ImageStemStage>(c.in_channels, c.width)};
  std::int64_t channels = c.width;
  for (size_t g = 0; g < c.blocks_per_group.size(); ++g) {
    const std::int64_t mid = c.width << g;
    for (std::int64_t b = 0; b < c.blocks_per_group[g]; ++b) {
      const std::int64_t stride = (g > 0 && b == 0) ? 2 : 1;
      names.push_back("block" + std::to_string(g) + "." + std::to_string(b));
      stages.push_back(std::make_shared<BottleneckStage>(channels, mid, 4 * mid, stride));
      channels = 4 * mid;
    }
  }
  names.push_back("classify");
  stages.push_back(std::make_shared<PooledClassifierStage>(channels, c.classes));
  return StagedModel("resnet50", std::move(names), std::move(stages));
}

}  // namespace memtrain::runtime
