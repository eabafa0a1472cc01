#include "predict/chain_predictor.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memtrain::predict {

namespace {

void observe_if(QuadraticModel& m, double x, const std::optional<Bytes>& v) {
  if (v) m.observe(x, static_cast<double>(*v));
}
void observe_if(QuadraticModel& m, double x, const std::optional<Seconds>& v) {
  if (v) m.observe(x, *v);
}
void observe_if(StridedBytes& m, std::optional<std::int64_t> side, const std::optional<Bytes>& v) {
  if (side && v) m.observe(*side, static_cast<double>(*v));
}

std::optional<Bytes> larger(const std::optional<Bytes>& a, const std::optional<Bytes>& b) {
  if (a && b) return std::max(*a, *b);
  return a ? a : b;
}

template <typename T>
std::optional<T> first_of(const std::optional<T>& a, const std::optional<T>& b) {
  return a ? a : b;
}

}  // namespace

ChainSample larger_of(const ChainSample& first, const ChainSample& second) {
  MEMTRAIN_ASSERT(first.stages.size() == second.stages.size(), "two samples of one chain");
  ChainSample out = first;
  for (size_t i = 0; i < out.stages.size(); ++i) {
    StageSample& s = out.stages[i];
    const StageSample& t = second.stages[i];
    s.input_bytes = larger(s.input_bytes, t.input_bytes);
    s.nograd_forward_temp_bytes = larger(s.nograd_forward_temp_bytes, t.nograd_forward_temp_bytes);
    if (s.variant != t.variant) continue;
    s.saved_bytes = larger(s.saved_bytes, t.saved_bytes);
    s.forward_temp_bytes = larger(s.forward_temp_bytes, t.forward_temp_bytes);
    s.backward_temp_bytes = larger(s.backward_temp_bytes, t.backward_temp_bytes);
    s.forward_time = first_of(s.forward_time, t.forward_time);
    s.backward_time = first_of(s.backward_time, t.backward_time);
  }
  out.output_bytes = larger(first.output_bytes, second.output_bytes);
  out.update_temp_bytes = larger(first.update_temp_bytes, second.update_temp_bytes);
  return out;
}

ChainPredictor::ChainPredictor(std::vector<StageConstants> stages, double margin)
    : constants_(std::move(stages)), models_(constants_.size()), variant_models_(constants_.size()),
      strided_(constants_.size()), variant_strided_(constants_.size()), margin_(margin) {
  if (!(margin >= 0)) throw Error("predictor: margin " + std::to_string(margin) + " must be >= 0");
  for (size_t i = 0; i < constants_.size(); ++i) {
    variant_models_[i].resize(constants_[i].variants.size());
    variant_strided_[i].resize(constants_[i].variants.size());
    // Times are noisy: fits that never decrease with size (QuadraticModel).
    models_[i][kForwardTime].require_nonnegative_coefficients();
    models_[i][kBackwardTime].require_nonnegative_coefficients();
    for (auto& v : variant_models_[i]) {
      v[kVForwardTime].require_nonnegative_coefficients();
      v[kVBackwardTime].require_nonnegative_coefficients();
    }
  }
}

void ChainPredictor::observe(std::int64_t size, const ChainSample& sample, const std::vector<std::int64_t>& shape) {
  if (sample.stages.size() != constants_.size()) {
    throw Error("predictor: sample has " + std::to_string(sample.stages.size()) + " stages, model has " +
                std::to_string(constants_.size()));
  }
  sides_.observe(shape);
  if (sides_.holds() && !sides_.is_member(size)) {
    throw Error("predictor: size " + std::to_string(size) + " is not the product of its input's shape");
  }
  const double x = static_cast<double>(size);
  const std::optional<std::int64_t> side = sides_.side(size);
  for (size_t i = 0; i < constants_.size(); ++i) {
    const StageSample& s = sample.stages[i];
    auto& m = models_[i];
    auto& by_side = strided_[i];
    observe_if(m[kInput], x, s.input_bytes);
    observe_if(m[kNogradTemp], x, s.nograd_forward_temp_bytes);
    observe_if(by_side[kInput], side, s.input_bytes);
    observe_if(by_side[kNogradTemp], side, s.nograd_forward_temp_bytes);
    if (s.variant < 0 || s.variant > static_cast<int>(variant_models_[i].size())) {
      throw Error("predictor: stage " + std::to_string(i) + " sample names variant " + std::to_string(s.variant) +
                  "; the stage has variants 0.." + std::to_string(variant_models_[i].size()));
    }
    if (s.variant == 0) {
      observe_if(m[kSaved], x, s.saved_bytes);
      observe_if(m[kForwardTemp], x, s.forward_temp_bytes);
      observe_if(m[kBackwardTemp], x, s.backward_temp_bytes);
      observe_if(m[kForwardTime], x, s.forward_time);
      observe_if(m[kBackwardTime], x, s.backward_time);
      observe_if(by_side[kSaved], side, s.saved_bytes);
      observe_if(by_side[kForwardTemp], side, s.forward_temp_bytes);
      observe_if(by_side[kBackwardTemp], side, s.backward_temp_bytes);
    } else {
      auto& v = variant_models_[i][s.variant - 1];
      auto& vs = variant_strided_[i][s.variant - 1];
      observe_if(vs[kVSaved], side, s.saved_bytes);
      observe_if(vs[kVForwardTemp], side, s.forward_temp_bytes);
      observe_if(vs[kVBackwardTemp], side, s.backward_temp_bytes);
      observe_if(v[kVSaved], x, s.saved_bytes);
      observe_if(v[kVForwardTemp], x, s.forward_temp_bytes);
      observe_if(v[kVBackwardTemp], x, s.backward_temp_bytes);
      observe_if(v[kVForwardTime], x, s.forward_time);
      observe_if(v[kVBackwardTime], x, s.backward_time);
    }
  }
  observe_if(output_bytes_, x, sample.output_bytes);
  observe_if(output_strided_, side, sample.output_bytes);
  observe_if(update_temp_bytes_, x, sample.update_temp_bytes);
  if (observations_ == 0) min_size_ = max_size_ = size;
  min_size_ = std::min(min_size_, size);
  max_size_ = std::max(max_size_, size);
  ++observations_;
}

bool ChainPredictor::ready() const {
  if (observations_ == 0) return false;
  for (const auto& m : models_) {
    for (int f = 0; f < kFields; ++f) {
      if (m[f].count() == 0) return false;
    }
  }
  return true;
}

bool ChainPredictor::in_range(std::int64_t size) const {
  return observations_ > 0 && size >= min_size_ && size <= max_size_;
}

std::optional<double> ChainPredictor::by_side(const StridedBytes& field, const std::vector<Stride>& in,
                                              const std::vector<Stride>& out, std::int64_t side, bool same) {
  std::optional<double> best;
  for (Stride a : in) {
    for (Stride b : out) {
      if (same && a != b) continue;
      const std::optional<double> y = field.fit(strides_between(a, b), side);
      if (y && (!best || *y > *best)) best = y;
    }
  }
  return best;
}

Chain ChainPredictor::predict(std::int64_t size) const {
  const double x = static_cast<double>(size);
  const double scale = in_range(size) ? 1.0 : 1.0 + margin_;
  const std::optional<std::int64_t> side = sides_.side(size);
  const size_t n = constants_.size();
  // Each stage's input strides; the last entry, the chain output's.
  std::vector<std::vector<Stride>> in_strides(n + 1);
  if (side) {
    for (size_t i = 0; i < n; ++i) in_strides[i] = strided_[i][kInput].consistent_strides();
    in_strides[n] = output_strided_.consistent_strides();
  }
  auto to_bytes = [&](double y) { return static_cast<Bytes>(std::llround(std::max(0.0, y) * scale)); };
  // A stage's input lies at its input's stride; what it saves and its
  // temporaries, at the strides from its input's to its output's.
  auto bytes = [&](const QuadraticModel& m, const StridedBytes& by, size_t stage, bool input = false) {
    std::optional<double> y;
    if (side) y = by_side(by, in_strides[stage], input ? in_strides[stage] : in_strides[stage + 1], *side, input);
    return to_bytes(y ? *y : m.predict_growing(x));
  };
  auto seconds = [&](const QuadraticModel& m) { return std::max(0.0, m.predict(x)); };
  Chain chain;
  chain.stages.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& m = models_[i];
    const auto& by = strided_[i];
    Stage& s = chain.stages[i];
    s.name = constants_[i].name;
    s.param_bytes = constants_[i].param_bytes;
    s.state_bytes = constants_[i].state_bytes;
    s.grad_bytes = constants_[i].grad_bytes;
    s.update_time = constants_[i].update_time;
    s.input_bytes = bytes(m[kInput], by[kInput], i, true);
    s.saved_bytes = bytes(m[kSaved], by[kSaved], i);
    s.forward_temp_bytes = bytes(m[kForwardTemp], by[kForwardTemp], i);
    s.nograd_forward_temp_bytes = bytes(m[kNogradTemp], by[kNogradTemp], i);
    s.backward_temp_bytes = bytes(m[kBackwardTemp], by[kBackwardTemp], i);
    s.forward_time = seconds(m[kForwardTime]);
    s.backward_time = seconds(m[kBackwardTime]);
    for (size_t v = 0; v < variant_models_[i].size(); ++v) {
      const auto& vm = variant_models_[i][v];
      const auto& vs = variant_strided_[i][v];
      // Variants keep their numbers: stop at the first not observed yet.
      if (std::any_of(vm.begin(), vm.end(), [](const QuadraticModel& q) { return q.count() == 0; })) break;
      StageVariant x{constants_[i].variants[v],
                     seconds(vm[kVForwardTime]),
                     seconds(vm[kVBackwardTime]),
                     bytes(vm[kVSaved], vs[kVSaved], i),
                     bytes(vm[kVForwardTemp], vs[kVForwardTemp], i),
                     bytes(vm[kVBackwardTemp], vs[kVBackwardTemp], i)};
      if (constants_[i].variants_recompute) {
        x.backward_time = std::max(x.backward_time, s.forward_time + s.backward_time - x.forward_time);
      }
      s.variants.push_back(x);
    }
  }
  chain.output_bytes = to_bytes(output_bytes_.predict_growing(x));
  chain.update_temp_bytes = to_bytes(update_temp_bytes_.predict_growing(x));
  return chain;
}

double ChainPredictor::memory_fit_error() const {
  double worst = 0;
  for (const auto& m : models_) {
    for (int f = 0; f < kMemoryFields; ++f) {
      const double scale = std::max(1.0, std::fabs(m[f].predict(m[f].max_x())));
      worst = std::max(worst, m[f].rms_residual() / scale);
    }
  }
  return worst;
}

}  // namespace memtrain::predict
