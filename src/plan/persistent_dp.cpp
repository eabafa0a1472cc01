#include "plan/persistent_dp.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace memtrain::plan {

namespace {

std::int64_t slots_of(Bytes bytes, Bytes slot) { return (bytes + slot - 1) / slot; }

}  // namespace

std::int64_t PersistentDp::keep_start(int i, int l, int k) const {
  // F_all(i) runs while the gradient of l+1 exists; B(i) holds x̄_i, delta_{i+1}, x_i and makes delta_i.
  std::int64_t start = std::max(gradient(l) + vs_[k] + vtf_[k], vs_[k] + a_[i + 1] + a_[i] + vtb_[k]);
  if (l > i) start = std::max(start, vs_[k] + least_[pair(i + 1, l)]);
  return start;
}

std::int64_t PersistentDp::checkpoint_start(int i, int l, int j, std::int64_t forward_peak) const {
  return std::max({gradient(l) + forward_peak, a_[j] + least_[pair(j, l)], least_[pair(i, j - 1)]});
}

void PersistentDp::solve(const Chain& chain, Bytes slot_bytes, std::int64_t capacity, bool variants) {
  if (slot_bytes < 1) throw UsageError("optimal planner: the slot size must be at least 1 byte");
  if (capacity < 0) capacity = 0;
  const int n = chain.size();
  if (n < 1 || n > 32767) throw UsageError("optimal planner: the chain must have 1..32767 stages, not " + std::to_string(n));
  const std::int64_t pairs = static_cast<std::int64_t>(n) * (n + 1) / 2;
  if (pairs * (capacity + 1) > kMaxEntries) {
    throw UsageError("optimal planner: " + std::to_string(n) + " stages at " + std::to_string(capacity) +
                     " slots of " + std::to_string(slot_bytes) + " bytes need a table of " +
                     std::to_string(pairs * (capacity + 1)) + " entries, more than the limit of " +
                     std::to_string(kMaxEntries) + "; use fewer --slots or a larger --slot-bytes");
  }
  n_ = n;
  capacity_ = capacity;
  width_ = static_cast<size_t>(capacity) + 1;
  computed_ = 0;

  a_.resize(n + 1);
  tn_.resize(n);
  f_.resize(n);
  for (int i = 0; i <= n; ++i) a_[i] = slots_of(chain.activation_bytes(i), slot_bytes);
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
  row_start_.resize(n);
  for (int i = 0, start = 0; i < n; start += n - i, ++i) row_start_[i] = start;
  least_.assign(pairs, capacity + 1);
  // Every entry is written below, so no initialisation is needed here.
  value_.resize(static_cast<size_t>(pairs) * width_);
  std::vector<double> lower(pairs);            // each stage once, fastest variant: no schedule is faster
  std::vector<std::int64_t> keep_all(pairs);  // least m at which keeping every stage that way fits

  const std::int64_t top_limit = capacity + 1;
  for (int d = 0; d < n; ++d) {
    for (int i = 0; i + d < n; ++i) {
      const int l = i + d;
      const int p = pair(i, l);
      const int fast = var_start_[i] + fastest_[i];
      std::int64_t ka = std::max(gradient(l) + vs_[fast] + vtf_[fast], vs_[fast] + a_[i + 1] + a_[i] + vtb_[fast]);
      lower[p] = vtime_[fast];
      if (d > 0) {
        ka = std::max(ka, vs_[fast] + keep_all[pair(i + 1, l)]);
        lower[p] += lower[pair(i + 1, l)];
      }
      keep_all[p] = ka;
      // Above `top` keeping every stage (fastest variants) fits: the lower bound.
      const std::int64_t top = std::min(ka, top_limit);
      double* val = values(i, l);
      std::fill(val, val + top, kInfinity);
      std::int64_t least = top;

      // Keep stage i whole as one of its variants, then i+1..l, then B(i).
      // Pure minimum updates: the compiler vectorises them.
      const double* rest = d > 0 ? values(i + 1, l) : nullptr;
      for (int k = var_start_[i]; k < var_start_[i + 1]; ++k) {
        const std::int64_t start = keep_start(i, l, k);
        if (start >= top) continue;
        const double own = vtime_[k];
        if (d == 0) {
          for (std::int64_t m = start; m < top; ++m) val[m] = std::min(val[m], own);
        } else {
          const std::int64_t s = vs_[k];
          for (std::int64_t m = start; m < top; ++m) val[m] = std::min(val[m], own + rest[m - s]);
        }
        computed_ += top - start;
        least = std::min(least, start);
      }
      // Checkpoint at j: F_ck(i), F_n(i+1..j-1) keep only x_i and x_j;
      // solve j..l with x_j held, then i..j-1 again with delta_j.
      std::int64_t forward_peak = a_[i + 1] + tn_[i];
      double forward_time = 0;
      for (int j = i + 1; j <= l; ++j) {
        forward_time += f_[j - 1];
        if (j > i + 1) forward_peak = std::max(forward_peak, a_[j - 1] + a_[j] + tn_[j - 1]);
        const std::int64_t start = checkpoint_start(i, l, j, forward_peak);
        if (start >= top) continue;
        const double* later = values(j, l);
        const double* again = values(i, j - 1);
        const std::int64_t aj = a_[j];
        for (std::int64_t m = start; m < top; ++m) val[m] = std::min(val[m], forward_time + later[m - aj] + again[m]);
        computed_ += top - start;
        least = std::min(least, start);
      }
      std::fill(val + top, val + width_, lower[p]);
      least_[p] = least;
    }
  }
}

double PersistentDp::value(int i, int l, std::int64_t m) const {
  if (m < 0) return kInfinity;
  return values(i, l)[std::min(m, capacity_)];
}

Schedule PersistentDp::schedule(std::int64_t m) const {
  m = std::min(m, capacity_);
  if (value(0, n_ - 1, m) == kInfinity) throw Error("optimal planner: no schedule fits " + std::to_string(m) + " slots");
  Schedule out;
  emit(0, n_ - 1, m, out);
  return out;
}

void PersistentDp::emit(int i, int l, std::int64_t m, Schedule& out) const {
  const double target = values(i, l)[m];
  for (int k = var_start_[i]; k < var_start_[i + 1]; ++k) {
    if (m < keep_start(i, l, k)) continue;
    const double t = l > i ? vtime_[k] + values(i + 1, l)[m - vs_[k]] : vtime_[k];
    if (t != target) continue;
    out.forward_all(i, k - var_start_[i]);
    if (l > i) emit(i + 1, l, m - vs_[k], out);
    else if (i == n_ - 1) out.loss();
    out.backward(i);
    return;
  }
  std::int64_t forward_peak = a_[i + 1] + tn_[i];
  double forward_time = 0;
  for (int j = i + 1; j <= l; ++j) {
    forward_time += f_[j - 1];
    if (j > i + 1) forward_peak = std::max(forward_peak, a_[j - 1] + a_[j] + tn_[j - 1]);
    if (m < checkpoint_start(i, l, j, forward_peak)) continue;
    if (forward_time + values(j, l)[m - a_[j]] + values(i, j - 1)[m] != target) continue;
    out.forward_checkpoint(i);
    for (int k = i + 1; k < j; ++k) out.forward_none(k);
    emit(j, l, m - a_[j], out);
    emit(i, j - 1, m, out);
    return;
  }
  throw Error("optimal planner: internal error, no branch reproduces the table at stages " + std::to_string(i) +
              ".." + std::to_string(l) + ", " + std::to_string(m) + " slots");
}

}  // namespace memtrain::plan
