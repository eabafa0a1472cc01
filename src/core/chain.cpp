#include "core/chain.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memtrain {

Bytes Chain::activation_bytes(int i) const {
  MEMTRAIN_ASSERT(i >= 0 && i <= size(), "activation index within the chain");
  return i == size() ? output_bytes : stages[i].input_bytes;
}

Bytes Chain::saved_beyond_output(int i, int variant) const {
  const Bytes saved = stages[i].variant(variant).saved_bytes;
  return saved - std::min(saved, activation_bytes(i + 1));
}

Bytes Chain::persistent_bytes() const { return resident_bytes + (weights_on_host ? 0 : model_state_bytes()); }

Bytes Chain::model_state_bytes() const {
  Bytes total = 0;
  for (const Stage& s : stages) total += s.param_bytes + s.state_bytes;
  return total;
}

Seconds Chain::forward_time() const {
  Seconds t = 0;
  for (const Stage& s : stages) t += s.forward_time;
  return t;
}

Seconds Chain::backward_time() const {
  Seconds t = 0;
  for (const Stage& s : stages) t += s.backward_time;
  return t;
}

void Chain::validate(const std::string& origin) const {
  if (stages.empty()) throw Error(origin + ": chain has no stages; expected at least one (the loss)");
  auto bad = [&](size_t i, const char* field, const std::string& why) {
    return Error(origin + ": stage " + std::to_string(i) + " ('" + stages[i].name + "') field " + field + " " + why);
  };
  const struct {
    const char* name;
    double v;
  } links[] = {{"device_to_host_bandwidth", device_to_host_bandwidth},
               {"host_to_device_bandwidth", host_to_device_bandwidth}};
  if (!(copy_issue_time >= 0) || !std::isfinite(copy_issue_time)) {
    throw Error(origin + ": chain field copy_issue_time is " + std::to_string(copy_issue_time) +
                "; expected seconds, finite and >= 0");
  }
  if (resident_bytes < 0) {
    throw Error(origin + ": chain field resident_bytes is " + std::to_string(resident_bytes) + "; expected >= 0");
  }
  for (const auto& l : links) {
    if (!(l.v >= 0) || !std::isfinite(l.v)) {
      throw Error(origin + ": chain field " + l.name + " is " + std::to_string(l.v) +
                  "; expected bytes per second, finite and >= 0 (0: no host link)");
    }
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    const struct {
      const char* name;
      Bytes v;
    } sizes[] = {{"input_bytes", s.input_bytes},
                 {"saved_bytes", s.saved_bytes},
                 {"forward_temp_bytes", s.forward_temp_bytes},
                 {"nograd_forward_temp_bytes", s.nograd_forward_temp_bytes},
                 {"backward_temp_bytes", s.backward_temp_bytes},
                 {"param_bytes", s.param_bytes},
                 {"state_bytes", s.state_bytes},
                 {"grad_bytes", s.grad_bytes}};
    for (const auto& f : sizes) {
      if (f.v < 0) throw bad(i, f.name, "is " + std::to_string(f.v) + "; expected >= 0");
    }
    if (s.grad_bytes > s.state_bytes) {
      throw bad(i, "grad_bytes",
                "is " + std::to_string(s.grad_bytes) + "; expected at most state_bytes (" +
                    std::to_string(s.state_bytes) + "), of which gradients are a part");
    }
    if (!(s.update_time >= 0) || !std::isfinite(s.update_time))
      throw bad(i, "update_time", "is " + std::to_string(s.update_time) + "; expected a finite value >= 0");
    if (!(s.forward_time >= 0) || !std::isfinite(s.forward_time))
      throw bad(i, "forward_time", "is " + std::to_string(s.forward_time) + "; expected a finite value >= 0");
    if (!(s.backward_time >= 0) || !std::isfinite(s.backward_time))
      throw bad(i, "backward_time", "is " + std::to_string(s.backward_time) + "; expected a finite value >= 0");
    if (s.variants.size() > 100)
      throw bad(i, "variants", "has " + std::to_string(s.variants.size()) + "; expected at most 100");
    for (size_t v = 0; v < s.variants.size(); ++v) {
      const StageVariant& x = s.variants[v];
      const std::string field = "variants[" + std::to_string(v) + "]";
      if (x.saved_bytes < 0 || x.forward_temp_bytes < 0 || x.backward_temp_bytes < 0)
        throw bad(i, field.c_str(), "has a negative size; expected sizes >= 0");
      if (!(x.forward_time >= 0) || !std::isfinite(x.forward_time) || !(x.backward_time >= 0) ||
          !std::isfinite(x.backward_time))
        throw bad(i, field.c_str(), "has a negative or infinite time; expected finite times >= 0");
    }
  }
  if (output_bytes < 0) throw Error(origin + ": output_bytes is " + std::to_string(output_bytes) + "; expected >= 0");
  if (update_temp_bytes < 0)
    throw Error(origin + ": update_temp_bytes is " + std::to_string(update_temp_bytes) + "; expected >= 0");
  validate_reduction(origin);
}

void Chain::validate_reduction(const std::string& origin) const {
  const GradientReduction& r = reduction;
  if (r.empty()) return;
  const std::string where = origin + ": reduction";
  for (std::size_t b = 0; b < r.buckets.size(); ++b) {
    const ReduceBucket& bucket = r.buckets[b];
    const std::string at = where + " bucket " + std::to_string(b);
    const int above = b == 0 ? size() : r.buckets[b - 1].first_stage;
    if (above == 0) throw Error(at + " comes after the bucket that starts at stage 0; expected that one last");
    if (bucket.first_stage < 0 || bucket.first_stage >= above) {
      throw Error(at + " first_stage is " + std::to_string(bucket.first_stage) + "; expected 0.." +
                  std::to_string(above - 1) + " (buckets go from the last stage down, each below the one before)");
    }
    if (bucket.bytes < 0) throw Error(at + " bytes is " + std::to_string(bucket.bytes) + "; expected >= 0");
    if (bucket.collectives < 1)
      throw Error(at + " collectives is " + std::to_string(bucket.collectives) + "; expected >= 1");
  }
  if (r.buckets.back().first_stage != 0) {
    throw Error(where + ": the last bucket starts at stage " + std::to_string(r.buckets.back().first_stage) +
                "; expected 0, so every stage's gradients are summed");
  }
  if (r.reserve_bytes < 0)
    throw Error(where + " reserve_bytes is " + std::to_string(r.reserve_bytes) + "; expected >= 0");
  if (!(r.network.latency >= 0) || !std::isfinite(r.network.latency) || !(r.network.seconds_per_byte >= 0) ||
      !std::isfinite(r.network.seconds_per_byte)) {
    throw Error(where + " network has latency " + std::to_string(r.network.latency) + " and seconds_per_byte " +
                std::to_string(r.network.seconds_per_byte) + "; expected finite values >= 0");
  }
}

}  // namespace memtrain
