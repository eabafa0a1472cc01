#include "runtime/models/unet.h"

#include <torch/torch.h>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

torch::nn::Conv2d conv3x3(std::int64_t in, std::int64_t out) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1));
}

// One 3x3 convolution with ReLU, a node of its own so that the planner can
// keep or recompute each; `Down` halves the image first (max-pooling), `Up`
// doubles its first input to the size of its second, the skip, and joins them.
class ConvNode : public GraphNodeModule {
 public:
  enum class Kind { Plain, Down, Up };
  ConvNode(Kind kind, std::int64_t in, std::int64_t out) : kind_(kind) { conv_ = register_module("conv", conv3x3(in, out)); }
  torch::Tensor forward(const std::vector<torch::Tensor>& inputs, StepContext&) override {
    torch::Tensor x = inputs[0];
    if (kind_ == Kind::Down) x = torch::max_pool2d(x, 2);
    if (kind_ == Kind::Up) {
      x = torch::upsample_nearest2d(x, std::vector<int64_t>{inputs[1].size(2), inputs[1].size(3)});
      x = torch::cat({x, inputs[1]}, 1);
    }
    return torch::relu(conv_->forward(x));
  }

 private:
  Kind kind_;
  torch::nn::Conv2d conv_{nullptr};
};

// 1x1 convolution to classes + 1 (background) and per-pixel cross-entropy;
// the targets come from the image (its second input) and the batch's labels.
class PixelLoss : public GraphNodeModule {
 public:
  PixelLoss(std::int64_t in, std::int64_t classes) : classes_(classes) {
    head_ = register_module("head", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, classes + 1, 1)));
  }
  torch::Tensor forward(const std::vector<torch::Tensor>& inputs, StepContext& ctx) override {
    const torch::Tensor logits = head_->forward(inputs[0]);
    torch::Tensor targets;
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor image = inputs[1].select(1, 0);
      const std::int64_t n = image.size(0);
      // Background pixels are the image's darkest (0 before normalisation).
      const torch::Tensor garment = image.gt(image.reshape({n, -1}).amin(1).view({n, 1, 1}) + 0.1);
      targets = torch::where(garment, ctx.targets.view({n, 1, 1}).expand_as(garment),
                             torch::full_like(garment, classes_, torch::kLong));
      ctx.correct = logits.argmax(1).eq(targets).sum().item<double>();
      ctx.counted = static_cast<double>(targets.numel());
    }
    return torch::nn::functional::cross_entropy(logits, targets);
  }

 private:
  std::int64_t classes_;
  torch::nn::Conv2d head_{nullptr};
};

}  // namespace

GraphModel make_unet(const UNetSpec& spec) {
  if (spec.levels < 1 || spec.levels > 6) {
    throw UsageError("unet: --layers (levels) " + std::to_string(spec.levels) + " is out of range; expected 1..6");
  }
  if (spec.width < 1) throw UsageError("unet: --width " + std::to_string(spec.width) + " must be at least 1");
  using Kind = ConvNode::Kind;
  std::vector<GraphModel::Node> nodes;
  nodes.push_back({"input", {}, nullptr});
  auto last = [&] { return static_cast<int>(nodes.size()) - 1; };
  // Each level: two convolutions; the first of an encoder level pools, the
  // first of a decoder level upsamples and joins its encoder level's output.
  auto add = [&](const std::string& name, Kind kind, std::vector<int> inputs, std::int64_t in, std::int64_t out) {
    nodes.push_back({name, std::move(inputs), std::make_shared<ConvNode>(kind, in, out)});
  };
  std::vector<int> encoder;  // the last node of each level
  std::int64_t channels = spec.width;
  add("enc0a", Kind::Plain, {0}, spec.in_channels, channels);
  add("enc0b", Kind::Plain, {last()}, channels, channels);
  encoder.push_back(last());
  for (std::int64_t l = 1; l <= spec.levels; ++l) {
    const std::string name = l == spec.levels ? "bottom" : "enc" + std::to_string(l);
    add(name + "a", Kind::Down, {last()}, channels, 2 * channels);
    add(name + "b", Kind::Plain, {last()}, 2 * channels, 2 * channels);
    channels *= 2;
    if (l < spec.levels) encoder.push_back(last());
  }
  for (std::int64_t l = spec.levels - 1; l >= 0; --l) {
    const std::int64_t out = channels / 2;
    const std::string name = "dec" + std::to_string(l);
    add(name + "a", Kind::Up, {last(), encoder[l]}, channels + out, out);
    add(name + "b", Kind::Plain, {last()}, out, out);
    channels = out;
  }
  nodes.push_back({"loss", {static_cast<int>(nodes.size()) - 1, 0}, std::make_shared<PixelLoss>(channels, spec.classes)});
  return GraphModel("unet", std::move(nodes));
}

}  // namespace memtrain::runtime
