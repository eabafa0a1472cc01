#include "runtime/builtin_models/resnet.h"

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/builtin_models/pooled_classifier_stage.h"
#include "runtime/ops/convolution_backward.h"
#include "runtime/ops/recomputed_segment.h"
#include "runtime/ops/step_batch_norm.h"

namespace memtrain::runtime {

namespace {

torch::nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

class StemStage : public StageModule {
 public:
  StemStage(int64_t in, int64_t out)
      : conv_(register_module("conv", conv3x3(in, out, 1))),
        norm_(register_module("norm", std::make_shared<StepBatchNorm>(out))) {}

  // One tensor per statement, ReLU in place (batch norm's backward needs its
  // input, not its output): without grad each intermediate dies as soon as
  // the next exists, instead of at the end of one long expression.
  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    torch::Tensor h = conv_(x);
    h = norm_->forward(h, ctx.training, ctx.update_buffers);
    return h.relu_();
  }

 private:
  torch::nn::Conv2d conv_;
  std::shared_ptr<StepBatchNorm> norm_;
};

// A convolution's input (when asked) and weight gradients.
std::tuple<torch::Tensor, torch::Tensor> conv_backward(const torch::nn::Conv2d& conv, const torch::Tensor& grad,
                                                       const torch::Tensor& input, bool input_grad) {
  ConvolutionGrads g = conv2d_backward(conv, grad, input, input_grad, /*want_weights=*/true);
  return {g.input, g.weight};
}

class BasicBlockStage : public StageModule, public Segment {
 public:
  BasicBlockStage(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", conv3x3(in, out, stride))),
        norm1_(register_module("norm1", std::make_shared<StepBatchNorm>(out))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        norm2_(register_module("norm2", std::make_shared<StepBatchNorm>(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module("shortcut",
                                  torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      shortcut_norm_ = register_module("shortcut_norm", std::make_shared<StepBatchNorm>(out));
    }
  }

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    const bool training_with_grad = ctx.training && torch::GradMode::is_enabled();
    if (ctx.variant == kRecomputeBlock && training_with_grad) {
      return RecomputedInBackward::apply(x, torch::TensorList(weights()), reinterpret_cast<int64_t>(this),
                                         ctx.update_buffers);
    }
    return plain_forward(x, ctx.training, ctx.update_buffers, ctx.variant == kRecomputeConv2 && training_with_grad);
  }

  // Norm, ReLU and the second convolution: the variant keeps only the first
  // convolution's output and recomputes the rest in the backward, dropping
  // the activation between them (training only: batch statistics).
  torch::Tensor run_segment(const torch::Tensor& c1, bool first_run) override {
    torch::Tensor h = norm1_->forward(c1, true, first_run);
    h.relu_();
    return conv2_(h);
  }

  std::vector<std::string> variant_names() const override { return {"recompute-conv2", "recompute-block"}; }

 private:
  static constexpr int kRecomputeConv2 = 1;
  static constexpr int kRecomputeBlock = 2;

  // As the stem: one tensor per statement, in-place ReLU and sum.
  torch::Tensor plain_forward(const torch::Tensor& x, bool training, bool update_buffers, bool recompute_conv2) {
    torch::Tensor h = conv1_(x);
    if (recompute_conv2) {
      h = run_recomputed(*this, h, update_buffers);
    } else {
      h = norm1_->forward(h, training, update_buffers);
      h.relu_();
      h = conv2_(h);
    }
    h = norm2_->forward(h, training, update_buffers);
    if (shortcut_) {
      torch::Tensor skip = shortcut_(x);
      h.add_(shortcut_norm_->forward(skip, training, update_buffers));
    } else {
      h.add_(x);
    }
    return h.relu_();
  }

  // The weights in the order the written-out backward returns their gradients.
  std::vector<torch::Tensor> weights() const {
    std::vector<torch::Tensor> w{conv1_->weight, norm1_->weight(), norm1_->bias(),
                                 conv2_->weight, norm2_->weight(), norm2_->bias()};
    if (shortcut_) {
      for (const torch::Tensor& t : {shortcut_->weight, shortcut_norm_->weight(), shortcut_norm_->bias()}) {
        w.push_back(t);
      }
    }
    return w;
  }

  // The "recompute-block" variant: the forward keeps only the block's input;
  // the backward runs the block again and calls the kernels autograd would,
  // on the same data, freeing each tensor once the last kernel that reads it
  // has run. The first convolution runs twice so that its output is not
  // alive while the second convolution's backward runs: at most seven
  // tensors of the input's size are alive at once (input, incoming gradient
  // and oneDNN's reordered copies included), where plain autograd holds nine.
  std::vector<torch::Tensor> backward_recomputing(const torch::Tensor& x, const torch::Tensor& grad_out,
                                                  bool input_grad) {
    torch::NoGradGuard no_grad;
    NormRun n1, n2;
    torch::Tensor r1;
    {
      const torch::Tensor c1 = conv1_(x);
      n1 = norm_forward(c1, norm1_->weight(), norm1_->bias());
      r1 = n1.output.relu_();
      n1.output = torch::Tensor();
    }
    torch::Tensor c2 = conv2_(r1);
    torch::Tensor g;  // the gradient at the sum, which the skip gets too
    {
      n2 = norm_forward(c2, norm2_->weight(), norm2_->bias());
      torch::Tensor h = std::move(n2.output);
      if (shortcut_) {
        h.add_(norm_forward(shortcut_(x), shortcut_norm_->weight(), shortcut_norm_->bias()).output);
      } else {
        h.add_(x);
      }
      h.relu_();
      g = at::threshold_backward(grad_out, h, 0);
    }
    std::vector<torch::Tensor> grads(1 + weights().size());
    torch::Tensor g_c2;
    std::tie(g_c2, grads[5], grads[6]) = norm_backward(n2, c2, g, norm2_->weight());
    c2 = torch::Tensor();
    torch::Tensor g_r1;
    std::tie(g_r1, grads[4]) = conv_backward(conv2_, g_c2, r1, true);
    g_c2 = torch::Tensor();
    torch::Tensor g_b1 = at::threshold_backward(g_r1, r1, 0);
    g_r1 = r1 = torch::Tensor();
    torch::Tensor g_c1;
    {
      const torch::Tensor c1 = conv1_(x);
      std::tie(g_c1, grads[2], grads[3]) = norm_backward(n1, c1, g_b1, norm1_->weight());
    }
    g_b1 = torch::Tensor();
    torch::Tensor g_x;
    std::tie(g_x, grads[1]) = conv_backward(conv1_, g_c1, x, input_grad);
    g_c1 = torch::Tensor();
    if (shortcut_) {
      const torch::Tensor s = shortcut_(x);
      NormRun ns = norm_forward(s, shortcut_norm_->weight(), shortcut_norm_->bias());
      ns.output = torch::Tensor();
      torch::Tensor g_s, g_skip;
      std::tie(g_s, grads[8], grads[9]) = norm_backward(ns, s, g, shortcut_norm_->weight());
      g = torch::Tensor();
      std::tie(g_skip, grads[7]) = conv_backward(shortcut_, g_s, x, input_grad);
      if (input_grad) g_x.add_(g_skip);
    } else if (input_grad) {
      g_x.add_(g);
    }
    grads[0] = input_grad ? g_x : torch::Tensor();
    return grads;
  }

  class RecomputedInBackward : public torch::autograd::Function<RecomputedInBackward> {
   public:
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 torch::TensorList /*weights: inputs only so that autograd hands their gradients
                                                     to backward*/
                                 ,
                                 int64_t block, bool update_buffers) {
      ctx->save_for_backward({x});
      ctx->saved_data["block"] = block;
      return reinterpret_cast<BasicBlockStage*>(block)->plain_forward(x, true, update_buffers, false);
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::tensor_list grads) {
      auto* block = reinterpret_cast<BasicBlockStage*>(ctx->saved_data["block"].toInt());
      const torch::Tensor x = ctx->get_saved_variables()[0];
      torch::autograd::tensor_list out = block->backward_recomputing(x, grads[0], ctx->needs_input_grad(0));
      out.resize(out.size() + 2);  // the block and update_buffers arguments
      return out;
    }
  };

  torch::nn::Conv2d conv1_;
  std::shared_ptr<StepBatchNorm> norm1_;
  torch::nn::Conv2d conv2_;
  std::shared_ptr<StepBatchNorm> norm2_;
  torch::nn::Conv2d shortcut_{nullptr};
  std::shared_ptr<StepBatchNorm> shortcut_norm_;
};

}  // namespace

StagedModel make_resnet(const ResNetConfig& c) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw UsageError("resnet: " + what);
  };
  check(c.in_channels >= 1, "input channels must be >= 1");
  check(c.classes >= 2, "classes must be >= 2");
  check(c.width >= 1 && c.width <= 1024, "width " + std::to_string(c.width) + " is out of range; expected 1..1024");
  check(c.groups >= 1 && c.groups <= 6, "groups " + std::to_string(c.groups) + " is out of range; expected 1..6");
  check(c.blocks_per_group >= 1 && c.blocks_per_group <= 64,
        "blocks per group (layers) " + std::to_string(c.blocks_per_group) + " is out of range; expected 1..64");

  std::vector<std::string> names{"stem"};
  std::vector<std::shared_ptr<StageModule>> stages{std::make_shared<StemStage>(c.in_channels, c.width)};
  int64_t channels = c.width;
  for (int64_t g = 0; g < c.groups; ++g) {
    const int64_t out = c.width << g;
    for (int64_t b = 0; b < c.blocks_per_group; ++b) {
      const int64_t stride = (g > 0 && b == 0) ? 2 : 1;
      names.push_back("block" + std::to_string(g) + "." + std::to_string(b));
      stages.push_back(std::make_shared<BasicBlockStage>(channels, out, stride));
      channels = out;
    }
  }
  names.push_back("classify");
  stages.push_back(std::make_shared<PooledClassifierStage>(channels, c.classes));
  return StagedModel("resnet", std::move(names), std::move(stages));
}

}  // namespace memtrain::runtime
