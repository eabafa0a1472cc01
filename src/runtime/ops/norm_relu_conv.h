// conv(relu(norm(x))) keeping only x for its backward (MONeT's idea of
// recomputing a cheap operator's output instead of keeping it): the
// normalised, rectified tensor the convolution reads is dropped after the
// forward and rebuilt in the backward from x, by batch norm and ReLU again
// on the same data with the same kernels, so its bits and every gradient
// are the plain composition's. It saves one tensor of the convolution's
// input size for the price of a batch norm and a ReLU forward.
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/types.h>

#include "runtime/ops/step_batch_norm.h"

namespace memtrain::runtime {

// Training mode with grad: `norm` updates its running statistics only when
// `update_buffers`, as StepBatchNorm::forward does. Without grad this is
// the plain composition. `norm` and `conv` must outlive the backward.
torch::Tensor norm_relu_conv_keeping_input(StepBatchNorm& norm, const torch::nn::Conv2d& conv, const torch::Tensor& x,
                                           bool update_buffers);

}  // namespace memtrain::runtime
