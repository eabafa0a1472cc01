#include "runtime/models/resnet.h"

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/models/classification_loss.h"
#include "runtime/ops/recomputed_segment.h"

namespace memtrain::runtime {

namespace {

// Batch norm in training mode normalises with the batch's statistics. Its
// running statistics are a side effect: updated on a stage's first forward
// of a step, not again when the stage is recomputed (StepContext::
// update_buffers), so a checkpointed run ends with the same buffers as a
// plain one.
class StepBatchNorm : public torch::nn::Module {
 public:
  explicit StepBatchNorm(int64_t channels)
      : weight_(register_parameter("weight", torch::ones({channels}))),
        bias_(register_parameter("bias", torch::zeros({channels}))),
        mean_(register_buffer("running_mean", torch::zeros({channels}))),
        var_(register_buffer("running_var", torch::ones({channels}))) {}

  torch::Tensor forward(const torch::Tensor& x, const StepContext& ctx) {
    return forward(x, ctx.training, ctx.update_buffers);
  }
  torch::Tensor forward(const torch::Tensor& x, bool training, bool update_buffers) {
    // In training without buffer updates, passing no running statistics
    // normalises with the batch's and records nothing.
    const bool running = !training || update_buffers;
    return torch::batch_norm(x, weight_, bias_, running ? mean_ : torch::Tensor(), running ? var_ : torch::Tensor(),
                             training, 0.1, 1e-5, /*cudnn_enabled=*/true);
  }

 private:
  torch::Tensor weight_, bias_, mean_, var_;
};

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
    h = norm_->forward(h, ctx);
    return h.relu_();
  }

 private:
  torch::nn::Conv2d conv_;
  std::shared_ptr<StepBatchNorm> norm_;
};

class BasicBlockStage : public StageModule, public Segment {
 public:
  BasicBlockStage(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", conv3x3(in, out, stride))),
        norm1_(register_module("norm1", std::make_shared<StepBatchNorm>(out))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        norm2_(register_module("norm2", std::make_shared<StepBatchNorm>(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module(
          "shortcut", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      shortcut_norm_ = register_module("shortcut_norm", std::make_shared<StepBatchNorm>(out));
    }
  }

  // As the stem: one tensor per statement, in-place ReLU and sum.
  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    torch::Tensor h = conv1_(x);
    const bool recompute = ctx.variant == 1 && ctx.training && torch::GradMode::is_enabled();
    if (recompute) {
      h = run_recomputed(*this, h, ctx.update_buffers);
    } else {
      h = norm1_->forward(h, ctx);
      h.relu_();
      h = conv2_(h);
    }
    h = norm2_->forward(h, ctx);
    if (shortcut_) {
      torch::Tensor skip = shortcut_(x);
      h.add_(shortcut_norm_->forward(skip, ctx));
    } else {
      h.add_(x);
    }
    return h.relu_();
  }

  // Norm, ReLU and the second convolution: the variant keeps only the first
  // convolution's output and recomputes the rest in the backward, dropping
  // the activation between them (training only: batch statistics).
  torch::Tensor run_segment(const torch::Tensor& c1, bool first_run) override {
    torch::Tensor h = norm1_->forward(c1, true, first_run);
    h.relu_();
    return conv2_(h);
  }

  std::vector<std::string> variant_names() const override { return {"recompute-conv2"}; }

 private:
  torch::nn::Conv2d conv1_;
  std::shared_ptr<StepBatchNorm> norm1_;
  torch::nn::Conv2d conv2_;
  std::shared_ptr<StepBatchNorm> norm2_;
  torch::nn::Conv2d shortcut_{nullptr};
  std::shared_ptr<StepBatchNorm> shortcut_norm_;
};

class PoolClassifierStage : public StageModule {
 public:
  PoolClassifierStage(int64_t channels, int64_t classes)
      : out_(register_module("out", torch::nn::Linear(channels, classes))) {}

  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    return classification_loss(out_(x.mean({2, 3})), ctx);
  }

 private:
  torch::nn::Linear out_;
};

}  // namespace

StagedModel make_resnet(const ResNetConfig& c) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw UsageError("resnet: " + what);
  };
  check(c.in_channels >= 1, "input channels must be >= 1");
  check(c.classes >= 2, "classes must be >= 2");
  check(c.width >= 1 && c.width <= 1024, "--width " + std::to_string(c.width) + " is out of range; expected 1..1024");
  check(c.groups >= 1 && c.groups <= 6, "groups " + std::to_string(c.groups) + " is out of range; expected 1..6");
  check(c.blocks_per_group >= 1 && c.blocks_per_group <= 64,
        "--layers " + std::to_string(c.blocks_per_group) + " (blocks per group) is out of range; expected 1..64");

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
  stages.push_back(std::make_shared<PoolClassifierStage>(channels, c.classes));
  return StagedModel("resnet", std::move(names), std::move(stages));
}

}  // namespace memtrain::runtime
