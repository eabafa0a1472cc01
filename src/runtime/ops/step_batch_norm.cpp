#include "runtime/ops/step_batch_norm.h"

#include <ATen/ATen.h>

namespace memtrain::runtime {

StepBatchNorm::StepBatchNorm(std::int64_t channels)
    : weight_(register_parameter("weight", torch::ones({channels}))),
      bias_(register_parameter("bias", torch::zeros({channels}))),
      mean_(register_buffer("running_mean", torch::zeros({channels}))),
      var_(register_buffer("running_var", torch::ones({channels}))) {}

torch::Tensor StepBatchNorm::forward(const torch::Tensor& x, bool training, bool update_buffers) {
  const bool running = !training || update_buffers;
  return at::batch_norm(x, weight_, bias_, running ? mean_ : torch::Tensor(), running ? var_ : torch::Tensor(),
                        training, kNormMomentum, kNormEps, /*cudnn_enabled=*/true);
}

NormRun StepBatchNorm::run(const torch::Tensor& x, bool update_buffers) {
  return update_buffers ? norm_forward(x, weight_, bias_, mean_, var_) : norm_forward(x, weight_, bias_);
}

NormRun norm_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& running_mean, const torch::Tensor& running_var) {
  // at::batch_norm is this call's first output.
  auto [out, mean, invstd, reserve, impl] = at::_batch_norm_impl_index(x, weight, bias, running_mean, running_var, true,
                                                                       kNormMomentum, kNormEps, /*cudnn_enabled=*/true);
  return {out, mean, invstd, reserve, impl};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> norm_backward(const NormRun& run, const torch::Tensor& input,
                                                                      const torch::Tensor& grad,
                                                                      const torch::Tensor& weight) {
  return at::_batch_norm_impl_index_backward(run.impl, input, grad, weight, {}, {}, run.mean, run.invstd, true,
                                             kNormEps, {true, true, true}, run.reserve);
}

}  // namespace memtrain::runtime
