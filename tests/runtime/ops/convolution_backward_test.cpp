#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/ops/convolution_backward.h"

namespace memtrain::runtime {
namespace {

struct AutogradGrads {
  torch::Tensor input, weight, bias;
};

AutogradGrads through_autograd(torch::nn::Conv2d& conv, const torch::Tensor& input, const torch::Tensor& upstream) {
  for (auto& p : conv->parameters()) p.mutable_grad() = torch::Tensor();
  const torch::Tensor x = input.detach().requires_grad_(true);
  torch::autograd::backward({conv(x)}, {upstream});
  return {x.grad(), conv->weight.grad().clone(), conv->bias.defined() ? conv->bias.grad().clone() : torch::Tensor()};
}

void expect_bits_equal(const torch::Tensor& got, const torch::Tensor& want, const char* what) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_TRUE(torch::equal(got, want)) << what << " differs by up to " << (got - want).abs().max().item<double>();
}

// The U-Net's 3x3 convolutions with bias and the ResNet's strided 1x1
// shortcut without: each gradient the same bits as autograd's.
TEST(ConvolutionBackward, GivesAutogradsGradientsBitForBit) {
  torch::manual_seed(7);
  std::vector<torch::nn::Conv2d> convs = {
      torch::nn::Conv2d(torch::nn::Conv2dOptions(5, 8, 3).padding(1)),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 1).stride(2).bias(false)),
  };
  for (auto& conv : convs) {
    const torch::Tensor input = torch::randn({4, conv->options.in_channels(), 12, 12});
    const torch::Tensor upstream = torch::randn_like(conv(input));
    const AutogradGrads want = through_autograd(conv, input, upstream);

    torch::NoGradGuard no_grad;
    const ConvolutionGrads got = conv2d_backward(conv, upstream, input, true, true);
    expect_bits_equal(got.input, want.input, "input gradient");
    expect_bits_equal(got.weight, want.weight, "weight gradient");
    if (conv->bias.defined()) {
      expect_bits_equal(got.bias, want.bias, "bias gradient");
    } else {
      EXPECT_FALSE(got.bias.defined()) << "a bias gradient for a convolution without bias";
    }
  }
}

TEST(ConvolutionBackward, ComputesOnlyWhatIsAskedFor) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3).padding(1));
  torch::NoGradGuard no_grad;
  const torch::Tensor input = torch::randn({2, 3, 6, 6});
  const torch::Tensor upstream = torch::randn({2, 4, 6, 6});

  const ConvolutionGrads weights_only = conv2d_backward(conv, upstream, input, false, true);
  EXPECT_FALSE(weights_only.input.defined());
  EXPECT_TRUE(weights_only.weight.defined());
  EXPECT_TRUE(weights_only.bias.defined());

  const ConvolutionGrads input_only = conv2d_backward(conv, upstream, input, true, false);
  EXPECT_TRUE(input_only.input.defined());
  EXPECT_FALSE(input_only.weight.defined());
  EXPECT_FALSE(input_only.bias.defined());
}

}  // namespace
}  // namespace memtrain::runtime
