#include "plan/persistent_dp.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace memtrain::plan {

namespace {

std::int64_t slots_of(Bytes bytes, Bytes slot) { return (bytes + slot - 1) / slot; }

}  // namespace

std::int64_t PersistentDp::keep_start(int i, int l, int k) const {
  std::int64_t start = std::max(forward_all_need(l, k), backward_need(i, k));
  if (l > i) start = std::max(start, vs_[k] + least_[pair(i + 1, l)]);
  return start;
}

void PersistentDp::forward_segments(int i, int l, std::vector<Segment>& out) const {
  out.clear();
  std::int64_t peak = a_[i + 1] + tn_[i];
  double time = 0;
  for (int j = i + 1; j <= l; ++j) {
    time += f_[j - 1];
    if (j > i + 1) peak = std::max(peak, a_[j - 1] + a_[j] + tn_[j - 1]);
    out.push_back({peak, time});
  }
}

std::int64_t PersistentDp::checkpoint_start(int i, int l, int j, std::int64_t forward_peak, bool own) const {
  return std::max({gradient(l) + forward_peak, a_[j] + leasts(true)[pair(j, l)], leasts(own)[pair(i, j - 1)]});
}

std::int64_t PersistentDp::offload_start(int i, int l, int j, std::int64_t forward_peak) const {
  // While j..l are solved x_i is gone; during B(j), the last operation of
  // that solve, x_i is back beside what B(j) needs, x_j included.
  const int k = var_start_[j];  // offloads come without variants: the plain stage
  return std::max({gradient(l) + forward_peak, a_[j] - freed(i) + own_least_[pair(j, l)], own_least_[pair(i, j - 1)],
                   a_[j] + backward_need(j, k)});
}

void PersistentDp::check_request(const Chain& chain, Bytes slot_bytes, bool variants, bool offloads) {
  if (slot_bytes < 1) throw UsageError("optimal planner: the slot size must be at least 1 byte");
  if (offloads && variants) {
    throw UsageError("optimal planner: offloads and operator variants in one table are not supported; plan with one");
  }
  if (offloads && !(chain.device_to_host_bandwidth > 0 && chain.host_to_device_bandwidth > 0)) {
    throw UsageError(
        "optimal planner: offloads need the chain's host link in both directions "
        "(device_to_host_bandwidth and host_to_device_bandwidth)");
  }
}

void PersistentDp::load(const Chain& chain, Bytes slot_bytes, std::int64_t capacity, bool variants, bool offloads) {
  const int n = chain.size();
  n_ = n;
  capacity_ = capacity;
  width_ = static_cast<size_t>(capacity) + 1;
  computed_ = 0;

  offloads_ = offloads;
  a_.resize(n + 1);
  a_down_.resize(n + 1);
  copy_out_.assign(n + 1, 0);
  copy_in_.assign(n + 1, 0);
  tn_.resize(n);
  f_.resize(n);
  b_.resize(n);
  for (int i = 0; i <= n; ++i) {
    const Bytes bytes = chain.activation_bytes(i);
    a_[i] = slots_of(bytes, slot_bytes);
    a_down_[i] = bytes / slot_bytes;
    if (offloads) {
      copy_out_[i] = static_cast<double>(bytes) / chain.device_to_host_bandwidth;
      copy_in_[i] = static_cast<double>(bytes) / chain.host_to_device_bandwidth;
    }
  }
  var_start_.assign(1, 0);
  vs_.clear();
  vtf_.clear();
  vtb_.clear();
  vtime_.clear();
  fastest_.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const Stage& st = chain.stages[i];
    tn_[i] = slots_of(st.nograd_forward_temp_bytes, slot_bytes);
    f_[i] = st.forward_time;  // a forward without grad: the same for every variant
    b_[i] = st.backward_time;
    const int count = variants ? st.variant_count() : 1;
    for (int v = 0; v < count; ++v) {
      const StageVariant x = st.variant(v);
      vs_.push_back(slots_of(x.saved_bytes, slot_bytes));
      vtf_.push_back(slots_of(x.forward_temp_bytes, slot_bytes));
      vtb_.push_back(slots_of(x.backward_temp_bytes, slot_bytes));
      vtime_.push_back(x.forward_time + x.backward_time);
      const int k = var_start_.back() + v, best = var_start_.back() + fastest_[i];
      if (vtime_[k] < vtime_[best]) fastest_[i] = v;  // ties: the plain stage
    }
    var_start_.push_back(var_start_.back() + count);
  }
}

void PersistentDp::solve(const Chain& chain, Bytes slot_bytes, std::int64_t capacity, bool variants, bool offloads) {
  check_request(chain, slot_bytes, variants, offloads);
  if (capacity < 0) capacity = 0;
  const int n = chain.size();
  if (n < 1 || n > 32767)
    throw UsageError("optimal planner: the chain must have 1..32767 stages, not " + std::to_string(n));
  const std::int64_t pairs = static_cast<std::int64_t>(n) * (n + 1) / 2;
  const std::int64_t tables = offloads ? 2 : 1;
  if (tables * pairs * (capacity + 1) > kMaxEntries) {
    throw UsageError("optimal planner: " + std::to_string(n) + " stages at " + std::to_string(capacity) + " slots of " +
                     std::to_string(slot_bytes) + " bytes need a table of " +
                     std::to_string(tables * pairs * (capacity + 1)) + " entries, more than the limit of " +
                     std::to_string(kMaxEntries) + "; use fewer slots or larger slot bytes");
  }
  load(chain, slot_bytes, capacity, variants, offloads);
  row_start_.resize(n);
  for (int i = 0, start = 0; i < n; start += n - i, ++i) row_start_[i] = start;
  least_.assign(pairs, capacity + 1);
  // Every entry is written below, so no initialisation is needed here.
  value_.resize(static_cast<size_t>(pairs) * width_);
  if (offloads) {
    own_least_.assign(pairs, capacity + 1);
    own_value_.resize(static_cast<size_t>(pairs) * width_);
  }
  std::vector<double> lower(pairs);           // each stage once, fastest variant: no schedule is faster
  std::vector<std::int64_t> keep_all(pairs);  // least m at which keeping every stage that way fits

  const std::int64_t top_limit = capacity + 1;
  std::vector<Segment> segments;  // reused for every (i, l)
  for (int d = 0; d < n; ++d) {
    for (int i = 0; i + d < n; ++i) {
      const int l = i + d;
      const int p = pair(i, l);
      const int fast = var_start_[i] + fastest_[i];
      std::int64_t ka = std::max(forward_all_need(l, fast), backward_need(i, fast));
      lower[p] = vtime_[fast];
      if (d > 0) {
        ka = std::max(ka, vs_[fast] + keep_all[pair(i + 1, l)]);
        lower[p] += lower[pair(i + 1, l)];
      }
      keep_all[p] = ka;
      // Above `top` keeping every stage (fastest variants) fits: the lower bound.
      const std::int64_t top = std::min(ka, top_limit);
      forward_segments(i, l, segments);
      fill(i, l, false, top, lower[p], segments);
      if (offloads) fill(i, l, true, top, lower[p], segments);
    }
  }
}

void PersistentDp::fill(int i, int l, bool own, std::int64_t top, double lower, const std::vector<Segment>& segments) {
  const int d = l - i;
  double* val = values(i, l, own);
  std::fill(val, val + top, kInfinity);
  std::int64_t least = top;

  // Keep stage i whole as one of its variants, then i+1..l, then B(i).
  // Pure minimum updates: the compiler vectorises them. x_{i+1} is then
  // inside x̄_i, not on its own.
  const double* rest = d > 0 ? values(i + 1, l, false) : nullptr;
  for (int k = var_start_[i]; k < var_start_[i + 1]; ++k) {
    const std::int64_t start = keep_start(i, l, k);
    if (start >= top) continue;
    const double own_time = vtime_[k];
    if (d == 0) {
      for (std::int64_t m = start; m < top; ++m) val[m] = std::min(val[m], own_time);
    } else {
      const std::int64_t s = vs_[k];
      for (std::int64_t m = start; m < top; ++m) val[m] = std::min(val[m], own_time + rest[m - s]);
    }
    computed_ += top - start;
    least = std::min(least, start);
  }
  // Checkpoint at j: F_ck(i), F_n(i+1..j-1) keep only x_i and x_j (on its
  // own); solve j..l with x_j held, then i..j-1 again with delta_j.
  for (int j = i + 1; j <= last_checkpoint(i, l); ++j) {
    const auto [forward_peak, forward_time] = segments[j - i - 1];
    const double* later = values(j, l, true);
    const double* again = values(i, j - 1, own);
    const std::int64_t start = checkpoint_start(i, l, j, forward_peak, own);
    if (start < top) {
      const std::int64_t aj = a_[j];
      for (std::int64_t m = start; m < top; ++m) val[m] = std::min(val[m], forward_time + later[m - aj] + again[m]);
      computed_ += top - start;
      least = std::min(least, start);
    }
    // The same with x_i in host memory meanwhile: j..l get its bytes.
    if (!may_offload(i, own)) continue;
    const std::int64_t ostart = offload_start(i, l, j, forward_peak);
    if (ostart >= top) continue;
    const double head = forward_time + out_stall(i, forward_time), tail = in_stall(i, j);
    const std::int64_t shift = freed(i) - a_[j];
    for (std::int64_t m = ostart; m < top; ++m) {
      val[m] = std::min(val[m], head + later[clamp(m + shift)] + tail + again[m]);
    }
    computed_ += top - ostart;
    least = std::min(least, ostart);
  }
  std::fill(val + top, val + width_, lower);
  (own && offloads_ ? own_least_ : least_)[pair(i, l)] = least;
}

double PersistentDp::value(int i, int l, std::int64_t m, bool own) const {
  if (m < 0) return kInfinity;
  return values(i, l, own)[std::min(m, capacity_)];
}

Schedule PersistentDp::schedule(std::int64_t m) const {
  m = std::min(m, capacity_);
  if (value(0, n_ - 1, m) == kInfinity)
    throw Error("optimal planner: no schedule fits " + std::to_string(m) + " slots");
  Schedule out;
  emit(0, n_ - 1, m, false, out);
  return out;
}

void PersistentDp::emit(int i, int l, std::int64_t m, bool own, Schedule& out) const {
  const double target = values(i, l, own)[m];
  for (int k = var_start_[i]; k < var_start_[i + 1]; ++k) {
    if (m < keep_start(i, l, k)) continue;
    const double t = l > i ? vtime_[k] + values(i + 1, l, false)[m - vs_[k]] : vtime_[k];
    if (t != target) continue;
    out.forward_all(i, k - var_start_[i]);
    if (l > i)
      emit(i + 1, l, m - vs_[k], false, out);
    else if (i == n_ - 1)
      out.loss();
    out.backward(i);
    return;
  }
  // Plain checkpoints before offloaded ones: an offload is emitted only
  // when no schedule without it at this level is as fast.
  std::vector<Segment> segments;
  forward_segments(i, l, segments);
  for (bool offload : {false, true}) {
    if (offload && !may_offload(i, own)) break;
    for (int j = i + 1; j <= last_checkpoint(i, l); ++j) {
      const auto [forward_peak, forward_time] = segments[j - i - 1];
      const double* later = values(j, l, true);
      const double* again = values(i, j - 1, own);
      if (!offload) {
        if (m < checkpoint_start(i, l, j, forward_peak, own) || forward_time + later[m - a_[j]] + again[m] != target) {
          continue;
        }
        out.forward_checkpoint(i);
        for (int k = i + 1; k < j; ++k) out.forward_none(k);
        emit(j, l, m - a_[j], true, out);
        emit(i, j - 1, m, own, out);
        return;
      }
      if (m < offload_start(i, l, j, forward_peak)) continue;
      const double head = forward_time + out_stall(i, forward_time), tail = in_stall(i, j);
      const std::int64_t child = clamp(m + freed(i) - a_[j]);
      if (head + later[child] + tail + again[m] != target) continue;
      out.offload(i);
      out.forward_checkpoint(i);
      for (int k = i + 1; k < j; ++k) out.forward_none(k);
      out.release(i);
      emit(j, l, child, true, out);
      // Back during B(j), the last operation of that solve.
      out.ops.insert(out.ops.end() - 1, Op{OpKind::Prefetch, i});
      emit(i, j - 1, m, own, out);
      return;
    }
  }
  fail_internal(__FILE__, __LINE__, "a branch reproduces the table",
                "optimal planner: none does at stages " + std::to_string(i) + ".." + std::to_string(l) + ", " +
                    std::to_string(m) + " slots");
}

}  // namespace memtrain::plan
