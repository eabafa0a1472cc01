#include "runtime/model/adam.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"

namespace memtrain::runtime {

namespace {

bool fusable(const torch::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

bool overlap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// The float constants of one update, computed once.
struct UpdateConstants {
  float b1, b2, rest1, rest2, sqrt_bias2, eps, step, decay;
};

// One update of elements [begin, end). This file is compiled without errno
// from sqrt and without contracting a multiply and an add into one
// rounding: the loops vectorize, and every lane rounds as the scalar loop
// would, so the bits do not depend on the CPU or the threads' split. Clones
// for AVX-512 and AVX2 are picked at load time by the CPU.
struct Updated {
  float w, m, v;
};

inline Updated update_element(float w, float m, float v, float g, const UpdateConstants& c) {
  const float mi = c.b1 * m + c.rest1 * g;
  const float vi = c.b2 * v + c.rest2 * (g * g);
  const float denom = std::sqrt(vi) / c.sqrt_bias2 + c.eps;
  return {w * c.decay - c.step * (mi / denom), mi, vi};
}

// In place: w, m, v are read and written through one pointer each.
__attribute__((target_clones("avx512f", "avx2", "default"))) void update_in_place(
    float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g, std::int64_t begin,
    std::int64_t end, UpdateConstants c) {
  for (std::int64_t i = begin; i < end; ++i) {
    const Updated u = update_element(w[i], m[i], v[i], g[i], c);
    w[i] = u.w;
    m[i] = u.m;
    v[i] = u.v;
  }
}

// Into outputs that share no memory with the inputs.
__attribute__((target_clones("avx512f", "avx2", "default"))) void update_into(
    float* __restrict w_out, float* __restrict m_out, float* __restrict v_out, const float* __restrict w,
    const float* __restrict m, const float* __restrict v, const float* __restrict g, std::int64_t begin,
    std::int64_t end, UpdateConstants c) {
  for (std::int64_t i = begin; i < end; ++i) {
    const Updated u = update_element(w[i], m[i], v[i], g[i], c);
    w_out[i] = u.w;
    m_out[i] = u.m;
    v_out[i] = u.v;
  }
}

// On the host an update is bound by memory traffic, and LibTorch's op-by-op
// update reads and writes each array several times (and allocates its
// denominator): this is one pass, on threads of its own.
void fused_update(bool in_place, float* w_out, float* m_out, float* v_out, const float* w, const float* m,
                  const float* v, const float* g, std::int64_t n, const AdamOptions& o, double bias1, double bias2) {
  const UpdateConstants c{static_cast<float>(o.beta1),          static_cast<float>(o.beta2),
                          static_cast<float>(1 - o.beta1),      static_cast<float>(1 - o.beta2),
                          static_cast<float>(std::sqrt(bias2)), static_cast<float>(o.eps),
                          static_cast<float>(o.lr / bias1),     static_cast<float>(1 - o.lr * o.weight_decay)};
  auto range = [&](std::int64_t begin, std::int64_t end) {
    if (in_place) {
      update_in_place(w_out, m_out, v_out, g, begin, end, c);
    } else {
      update_into(w_out, m_out, v_out, w, m, v, g, begin, end, c);
    }
  };
  // On LibTorch's own OpenMP threads (this file is built with -fopenmp, so
  // at::parallel_for is OpenMP here too): threads of our own ran beside
  // LibTorch's, still spinning after its last op, and lost a quarter of
  // the update's speed to them. Small tensors are not worth a thread.
  constexpr std::int64_t kPerThread = 1 << 18;
  at::parallel_for(0, n, kPerThread, range);
}

}  // namespace

Adam::Adam(std::vector<torch::Tensor> params, AdamOptions options, std::vector<ElementRange> owned)
    : params_(std::move(params)), owned_(std::move(owned)), sharded_(!owned_.empty()), options_(options) {
  torch::NoGradGuard no_grad;
  if (!sharded_) {
    for (const torch::Tensor& p : params_) owned_.push_back({0, p.numel()});
  }
  MEMTRAIN_ASSERT(owned_.size() == params_.size(), "an owned range per parameter");
  for (size_t k = 0; k < params_.size(); ++k) {
    torch::Tensor& p = params_[k];
    MEMTRAIN_ASSERT(owned_[k].begin >= 0 && owned_[k].end <= p.numel() && owned_[k].size() >= 0,
                    "owned elements lie within the parameter");
    p.mutable_grad() = torch::zeros_like(p);
    if (sharded_) {
      // Flat views of the weight are taken per update: it must be one block.
      MEMTRAIN_ASSERT(p.is_contiguous(), "a sharded optimizer's parameters are contiguous");
      m_.push_back(torch::zeros({owned_[k].size()}, p.options()));
      v_.push_back(torch::zeros({owned_[k].size()}, p.options()));
    } else {
      m_.push_back(torch::zeros_like(p));
      v_.push_back(torch::zeros_like(p));
    }
  }
}

Bytes Adam::state_bytes() const {
  Bytes total = 0;
  for (size_t k = 0; k < m_.size(); ++k) total += static_cast<Bytes>(m_[k].nbytes() + v_[k].nbytes());
  return total;
}

void Adam::zero_grad() {
  for (torch::Tensor& p : params_) p.mutable_grad().zero_();
}

Bytes Adam::update_temp_bytes() const {
  constexpr Bytes kScalarAllowance = 1024;  // measured: 12 bytes per update
  // Updates in one pass allocate nothing.
  if (std::all_of(params_.begin(), params_.end(), [](const torch::Tensor& p) { return fusable(p); })) {
    return kScalarAllowance;
  }
  Bytes largest = 0;
  for (const torch::Tensor& m : m_) largest = std::max<Bytes>(largest, static_cast<Bytes>(m.nbytes()));
  return largest + kScalarAllowance;
}

void Adam::step() {
  ++steps_;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!sharded_) {
      apply(params_[k], m_[k], v_[k], params_[k].grad(), steps_);
      continue;
    }
    const ElementRange& r = owned_[k];
    if (r.size() == 0) continue;
    const auto part = [&](const torch::Tensor& t) { return t.detach().view({-1}).narrow(0, r.begin, r.size()); };
    apply(part(params_[k]), m_[k], v_[k], part(params_[k].grad()), steps_);
  }
}

void Adam::apply(torch::Tensor w, torch::Tensor m, torch::Tensor v, const torch::Tensor& g, long t) const {
  apply_into(w, m, v, w, m, v, g, t);
}

void Adam::apply_into(torch::Tensor w_out, torch::Tensor m_out, torch::Tensor v_out, const torch::Tensor& w,
                      const torch::Tensor& m, const torch::Tensor& v, const torch::Tensor& g, long t) const {
  torch::NoGradGuard no_grad;
  const double bias1 = 1 - std::pow(options_.beta1, t);
  const double bias2 = 1 - std::pow(options_.beta2, t);
  const bool fused = fusable(w_out) && fusable(m_out) && fusable(v_out) && fusable(w) && fusable(m) && fusable(v) &&
                     fusable(g) && w.numel() == g.numel();
  if (fused) {
    // The pass runs in place, or into outputs apart from every input; any
    // other mix is copied into the outputs first and updated there.
    const bool in_place =
        w_out.data_ptr() == w.data_ptr() && m_out.data_ptr() == m.data_ptr() && v_out.data_ptr() == v.data_ptr();
    bool apart = true;
    for (const torch::Tensor* out : {&w_out, &m_out, &v_out}) {
      for (const torch::Tensor* in : {&w, &m, &v, &g}) apart = apart && !overlap(*out, *in);
    }
    if (!in_place && !apart) {
      if (!w_out.is_same(w)) w_out.copy_(w);
      if (!m_out.is_same(m)) m_out.copy_(m);
      if (!v_out.is_same(v)) v_out.copy_(v);
    }
    const bool from_outputs = in_place || !apart;
    fused_update(from_outputs, w_out.data_ptr<float>(), m_out.data_ptr<float>(), v_out.data_ptr<float>(),
                 w.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(), g.data_ptr<float>(), w.numel(),
                 options_, bias1, bias2);
    return;
  }
  // Elsewhere (a GPU) op by op, one temporary the size of the weight.
  if (!w_out.is_same(w)) w_out.copy_(w);
  if (!m_out.is_same(m)) m_out.copy_(m);
  if (!v_out.is_same(v)) v_out.copy_(v);
  if (options_.weight_decay != 0) w_out.mul_(1 - options_.lr * options_.weight_decay);
  m_out.mul_(options_.beta1).add_(g, 1 - options_.beta1);
  v_out.mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
  const torch::Tensor denom = v_out.sqrt().div_(std::sqrt(bias2)).add_(options_.eps);
  w_out.addcdiv_(m_out, denom, -options_.lr / bias1);
}

double Adam::measure_host_seconds_per_byte(Bytes bytes, int repeats) {
  const std::int64_t count = std::max<std::int64_t>(1, bytes / static_cast<Bytes>(sizeof(float)));
  torch::Tensor w = torch::randn({count}), g = torch::randn({count});
  torch::Tensor m = torch::zeros({count}), v = torch::zeros({count});
  const Adam timing({}, AdamOptions{});
  timing.apply(w, m, v, g, 1);  // untimed: the first touch of fresh pages and the thread pool's start
  double fastest = 0;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    timing.apply(w, m, v, g, r + 2);
    const double s = seconds_since(t0);
    // The fastest: interference from the rest of the machine only adds time.
    fastest = r == 0 ? s : std::min(fastest, s);
  }
  return fastest / static_cast<double>(count * static_cast<std::int64_t>(sizeof(float)));
}

}  // namespace memtrain::runtime
