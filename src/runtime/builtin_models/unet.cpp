#include "runtime/builtin_models/unet.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/ops/convolution_backward.h"

namespace memtrain::runtime {

namespace {

constexpr std::int64_t kPadding = 1;  // keeps the image's size

torch::nn::Conv2d conv3x3(std::int64_t in, std::int64_t out) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(kPadding));
}

// One 3x3 convolution with ReLU, a node of its own so that the planner can
// keep or recompute each; `Down` halves the image first (max-pooling), `Up`
// doubles its first input to the size of its second, the skip, and joins them.
class ConvNode : public GraphNodeModule {
 public:
  enum class Kind { Plain, Down, Up };
  ConvNode(Kind kind, std::int64_t in, std::int64_t out) : kind_(kind) {
    conv_ = register_module("conv", conv3x3(in, out));
  }
  torch::Tensor forward(const std::vector<torch::Tensor>& inputs, StepContext&) override {
    return torch::relu(conv_->forward(convolved(inputs)));
  }

  // From the inputs and the output alone, the kernels autograd would run,
  // so the gradients are the same bits and no forward runs again: ReLU's
  // backward reads its output, the convolution's its input, which pooling
  // or upsampling rebuilds from the node's inputs without keeping anything.
  std::vector<torch::Tensor> backward(const std::vector<torch::Tensor>& inputs, const torch::Tensor& output,
                                      const torch::Tensor& grad_output, const std::vector<bool>& wanted,
                                      bool accumulate_weights, StepContext&) override {
    torch::NoGradGuard no_grad;
    const bool any_input = std::find(wanted.begin(), wanted.end(), true) != wanted.end();
    torch::Tensor x, pool_indices;
    if (kind_ == Kind::Down) {
      std::tie(x, pool_indices) = at::max_pool2d_with_indices(inputs[0], 2);
    } else {
      x = convolved(inputs);
    }
    const torch::Tensor g_pre = at::threshold_backward(grad_output, output, 0);
    const ConvolutionGrads g = conv2d_backward(conv_, g_pre, x, any_input, accumulate_weights);
    if (accumulate_weights) {
      accumulate(conv_->weight, g.weight);
      accumulate(conv_->bias, g.bias);
    }
    const torch::Tensor& gx = g.input;
    std::vector<torch::Tensor> grads(inputs.size());
    if (!any_input) return grads;
    switch (kind_) {
      case Kind::Plain: grads[0] = gx; break;
      case Kind::Down:
        grads[0] = at::max_pool2d_with_indices_backward(gx, inputs[0], 2, 2, 0, 1, false, pool_indices);
        break;
      case Kind::Up: {
        const std::int64_t up = x.size(1) - inputs[1].size(1);
        if (wanted[0]) {
          grads[0] = at::upsample_nearest2d_backward(gx.narrow(1, 0, up), {x.size(2), x.size(3)}, inputs[0].sizes());
        }
        if (wanted[1]) grads[1] = gx.narrow(1, up, inputs[1].size(1)).contiguous();
        break;
      }
    }
    for (size_t p = 0; p < grads.size(); ++p) {
      if (!wanted[p]) grads[p] = torch::Tensor();
    }
    return grads;
  }

 private:
  // What the convolution reads.
  torch::Tensor convolved(const std::vector<torch::Tensor>& inputs) const {
    torch::Tensor x = inputs[0];
    if (kind_ == Kind::Down) x = torch::max_pool2d(x, 2);
    if (kind_ == Kind::Up) {
      x = torch::upsample_nearest2d(x, std::vector<int64_t>{inputs[1].size(2), inputs[1].size(3)});
      x = torch::cat({x, inputs[1]}, 1);
    }
    return x;
  }
  // As autograd's AccumulateGrad does outside grad mode: in place when there is one.
  static void accumulate(torch::Tensor& param, const torch::Tensor& g) {
    if (param.grad().defined()) {
      param.mutable_grad().add_(g);
    } else {
      param.mutable_grad() = g;
    }
  }

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
    const torch::Tensor targets = pixel_targets(inputs[1], ctx);
    {
      torch::NoGradGuard no_grad;
      ctx.count(logits.argmax(1).eq(targets).sum(),
                torch::scalar_tensor(static_cast<double>(targets.numel()), logits.options().dtype(torch::kDouble)));
    }
    return torch::nn::functional::cross_entropy(logits, targets);
  }

  // Autograd through the head and the loss alone: the accuracy the forward
  // counts is not needed again.
  std::vector<torch::Tensor> backward(const std::vector<torch::Tensor>& inputs, const torch::Tensor&,
                                      const torch::Tensor& grad_output, const std::vector<bool>& wanted,
                                      bool accumulate_weights, StepContext& ctx) override {
    torch::AutoGradMode grad_on(true);
    const torch::Tensor x = inputs[0].detach().requires_grad_(wanted[0]);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(head_->forward(x), pixel_targets(inputs[1], ctx));
    std::vector<torch::Tensor> grads(inputs.size());
    if (accumulate_weights) {
      torch::autograd::backward({loss}, {grad_output});
      if (wanted[0]) grads[0] = x.grad();
    } else if (wanted[0]) {
      grads[0] = torch::autograd::grad({loss}, {x}, {grad_output})[0];
    }
    return grads;
  }

 private:
  // Background pixels are the image's darkest (0 before normalisation); the
  // rest are the garment's class.
  torch::Tensor pixel_targets(const torch::Tensor& input, const StepContext& ctx) const {
    torch::NoGradGuard no_grad;
    const torch::Tensor image = input.select(1, 0);
    const std::int64_t n = image.size(0);
    const torch::Tensor garment = image.gt(image.reshape({n, -1}).amin(1).view({n, 1, 1}) + 0.1);
    return torch::where(garment, ctx.targets.view({n, 1, 1}).expand_as(garment),
                        torch::full_like(garment, classes_, torch::kLong));
  }

 private:
  std::int64_t classes_;
  torch::nn::Conv2d head_{nullptr};
};

}  // namespace

GraphModel make_unet(const UNetSpec& spec) {
  if (spec.levels < 1 || spec.levels > 6) {
    throw UsageError("unet: levels (layers) " + std::to_string(spec.levels) + " is out of range; expected 1..6");
  }
  if (spec.width < 1) throw UsageError("unet: width " + std::to_string(spec.width) + " must be at least 1");
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
  nodes.push_back(
      {"loss", {static_cast<int>(nodes.size()) - 1, 0}, std::make_shared<PixelLoss>(channels, spec.classes)});
  return GraphModel("unet", std::move(nodes));
}

}  // namespace memtrain::runtime
