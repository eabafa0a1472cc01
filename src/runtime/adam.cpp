#include "runtime/adam.h"

#include <cmath>

#include <torch/torch.h>

namespace memtrain::runtime {

Adam::Adam(std::vector<torch::Tensor> params, AdamOptions options)
    : params_(std::move(params)), options_(options) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : params_) {
    p.mutable_grad() = torch::zeros_like(p);
    m_.push_back(torch::zeros_like(p));
    v_.push_back(torch::zeros_like(p));
  }
}

void Adam::zero_grad() {
  for (torch::Tensor& p : params_) p.mutable_grad().zero_();
}

Bytes Adam::update_temp_bytes() const {
  constexpr Bytes kScalarAllowance = 1024;  // measured: 12 bytes per update
  Bytes largest = 0;
  for (const torch::Tensor& p : params_) largest = std::max<Bytes>(largest, static_cast<Bytes>(p.nbytes()));
  return largest + kScalarAllowance;
}

void Adam::step() {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double bias1 = 1 - std::pow(options_.beta1, steps_);
  const double bias2 = 1 - std::pow(options_.beta2, steps_);
  for (size_t k = 0; k < params_.size(); ++k) {
    torch::Tensor& p = params_[k];
    const torch::Tensor& g = p.grad();
    if (options_.weight_decay != 0) p.mul_(1 - options_.lr * options_.weight_decay);
    m_[k].mul_(options_.beta1).add_(g, 1 - options_.beta1);
    v_[k].mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
    const torch::Tensor denom = v_[k].sqrt().div_(std::sqrt(bias2)).add_(options_.eps);
    p.addcdiv_(m_[k], denom, -options_.lr / bias1);
  }
}

}  // namespace memtrain::runtime
