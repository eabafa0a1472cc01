#include "runtime/ops/convolution_backward.h"

#include <ATen/ATen.h>

namespace memtrain::runtime {

ConvolutionGrads conv2d_backward(const torch::nn::Conv2d& conv, const torch::Tensor& grad_output,
                                 const torch::Tensor& input, bool want_input, bool want_weights) {
  const auto& o = conv->options;
  const auto padding = std::get<torch::ExpandingArray<2>>(o.padding());
  const bool has_bias = conv->bias.defined();
  const std::optional<at::IntArrayRef> bias_sizes =
      has_bias ? std::optional<at::IntArrayRef>(conv->bias.sizes()) : std::nullopt;
  auto pass = [&](std::array<bool, 3> mask) {
    return at::convolution_backward(grad_output, input, conv->weight, bias_sizes, o.stride(), padding, o.dilation(),
                                    false, std::vector<int64_t>{0, 0}, o.groups(), mask);
  };
  ConvolutionGrads grads;
  if (want_weights) {
    auto weight_pass = pass({false, true, has_bias});
    grads.weight = std::get<1>(weight_pass);
    grads.bias = std::get<2>(weight_pass);
  }
  if (want_input) grads.input = std::get<0>(pass({true, false, false}));
  return grads;
}

}  // namespace memtrain::runtime
