// Batch norm as a training step needs it, and its forward and backward run
// by hand for written-out backwards.
//
// In training mode batch norm normalises with the batch's statistics. Its
// running statistics are a side effect: updated on a stage's first forward
// of a step, not again when the stage is recomputed (StepContext::
// update_buffers), so a checkpointed run ends with the same buffers as a
// plain one. norm_forward and norm_backward call the kernels autograd
// calls for torch::batch_norm, so a written-out backward gives its bits.
#pragma once

#include <cstdint>
#include <tuple>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace memtrain::runtime {

constexpr double kNormMomentum = 0.1;
constexpr double kNormEps = 1e-5;

// One training-mode forward as a backward needs it: the output and the
// statistics the backward reads.
struct NormRun {
  torch::Tensor output, mean, invstd, reserve;
  std::int64_t impl = 0;
};

class StepBatchNorm : public torch::nn::Module {
 public:
  explicit StepBatchNorm(std::int64_t channels);

  // Training without buffer updates normalises with the batch's statistics
  // and records nothing.
  torch::Tensor forward(const torch::Tensor& x, bool training, bool update_buffers);
  // The training-mode forward with the statistics its backward reads: the
  // same output bits as forward(x, true, update_buffers).
  NormRun run(const torch::Tensor& x, bool update_buffers);
  const torch::Tensor& weight() const { return weight_; }
  const torch::Tensor& bias() const { return bias_; }

 private:
  torch::Tensor weight_, bias_, mean_, var_;
};

// A training-mode forward; it updates running statistics only where given.
NormRun norm_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& running_mean = {}, const torch::Tensor& running_var = {});

// Gradients of the input, weight and bias, given the run's statistics and
// the input it normalised.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> norm_backward(const NormRun& run, const torch::Tensor& input,
                                                                      const torch::Tensor& grad,
                                                                      const torch::Tensor& weight);

}  // namespace memtrain::runtime
