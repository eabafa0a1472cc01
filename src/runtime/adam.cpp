#include "runtime/adam.h"

#include <algorithm>
#include <chrono>
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
  ++steps_;
  for (size_t k = 0; k < params_.size(); ++k) apply(params_[k], m_[k], v_[k], params_[k].grad(), steps_);
}

void Adam::apply(torch::Tensor w, torch::Tensor m, torch::Tensor v, const torch::Tensor& g, long t) const {
  torch::NoGradGuard no_grad;
  const double bias1 = 1 - std::pow(options_.beta1, t);
  const double bias2 = 1 - std::pow(options_.beta2, t);
  if (options_.weight_decay != 0) w.mul_(1 - options_.lr * options_.weight_decay);
  m.mul_(options_.beta1).add_(g, 1 - options_.beta1);
  v.mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
  const torch::Tensor denom = v.sqrt().div_(std::sqrt(bias2)).add_(options_.eps);
  w.addcdiv_(m, denom, -options_.lr / bias1);
}

double Adam::measure_host_seconds_per_byte(Bytes bytes, int repeats) {
  const std::int64_t count = std::max<std::int64_t>(1, bytes / static_cast<Bytes>(sizeof(float)));
  torch::Tensor w = torch::randn({count}), g = torch::randn({count});
  torch::Tensor m = torch::zeros({count}), v = torch::zeros({count});
  const Adam timing({}, AdamOptions{});
  std::vector<double> seconds;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    timing.apply(w, m, v, g, r + 1);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] / static_cast<double>(count * static_cast<std::int64_t>(sizeof(float)));
}

}  // namespace memtrain::runtime
