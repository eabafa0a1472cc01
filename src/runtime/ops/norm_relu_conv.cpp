#include "runtime/ops/norm_relu_conv.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "core/error.h"
#include "runtime/ops/convolution_backward.h"

namespace memtrain::runtime {

namespace {

torch::Tensor plain(StepBatchNorm& norm, const torch::nn::Conv2d& conv, const torch::Tensor& x, bool update_buffers) {
  torch::Tensor h = norm.forward(x, true, update_buffers);
  h.relu_();
  return conv.ptr()->forward(h);
}

class NormReluConv : public torch::autograd::Function<NormReluConv> {
 public:
  // The weights are inputs only so that autograd hands their gradients to
  // backward.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& /*norm_weight*/, const torch::Tensor& /*norm_bias*/,
                               const torch::Tensor& /*conv_weight*/, int64_t norm, int64_t conv, bool update_buffers) {
    ctx->save_for_backward({x});
    ctx->saved_data["norm"] = norm;
    ctx->saved_data["conv"] = conv;
    return plain(*reinterpret_cast<StepBatchNorm*>(norm), *reinterpret_cast<const torch::nn::Conv2d*>(conv), x,
                 update_buffers);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    torch::NoGradGuard no_grad;
    auto& norm = *reinterpret_cast<StepBatchNorm*>(ctx->saved_data["norm"].toInt());
    const auto& conv = *reinterpret_cast<const torch::nn::Conv2d*>(ctx->saved_data["conv"].toInt());
    const torch::Tensor x = ctx->get_saved_variables()[0];
    NormRun run = norm_forward(x, norm.weight(), norm.bias());
    torch::Tensor r = std::move(run.output).relu_();
    ConvolutionGrads c = conv2d_backward(conv, grads[0], r, /*want_input=*/true, /*want_weights=*/true);
    // ReLU in place saves its result; its backward reads that.
    torch::Tensor g = at::threshold_backward(c.input, r, 0);
    c.input = r = torch::Tensor();
    auto [g_x, g_weight, g_bias] = norm_backward(run, x, g, norm.weight());
    return {g_x, g_weight, g_bias, c.weight, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor norm_relu_conv_keeping_input(StepBatchNorm& norm, const torch::nn::Conv2d& conv, const torch::Tensor& x,
                                           bool update_buffers) {
  if (!torch::GradMode::is_enabled()) return plain(norm, conv, x, update_buffers);
  MEMTRAIN_ASSERT(!conv->bias.defined(), "norm_relu_conv_keeping_input: the convolution must have no bias");
  return NormReluConv::apply(x, norm.weight(), norm.bias(), conv->weight, reinterpret_cast<int64_t>(&norm),
                             reinterpret_cast<int64_t>(&conv), update_buffers);
}

}  // namespace memtrain::runtime
