// A 2-d convolution's backward run by hand, from the tensor it read: the
// kernels autograd runs, so the gradients are the same bits, for the written-
// out backwards of operator variants and graph nodes.
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/types.h>

namespace memtrain::runtime {

struct ConvolutionGrads {
  torch::Tensor input, weight, bias;  // undefined where not asked for or no bias
};

// The weight (and bias, when the convolution has one) gradient is computed
// in a call of its own, before the input gradient: oneDNN's reordered copies
// of the input and the gradient for the weight pass are then freed before
// the input gradient exists, instead of living beside it.
ConvolutionGrads conv2d_backward(const torch::nn::Conv2d& conv, const torch::Tensor& grad_output,
                                 const torch::Tensor& input, bool want_input, bool want_weights);

}  // namespace memtrain::runtime
