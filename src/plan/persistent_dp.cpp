#include "plan/persistent_dp.h"

#include <algorithm>
#include <cassert>
#include <string>

#include "core/error.h"

namespace memtrain::plan {

namespace {

std::int64_t slots_of(Bytes bytes, Bytes slot) { return (bytes + slot - 1) / slot; }

}  // namespace

void PersistentDp::solve(const Chain& chain, Bytes slot_bytes, std::int64_t capacity) {
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
  slot_bytes_ = slot_bytes;
  computed_ = 0;

  a_.resize(n + 1);
  s_.resize(n);
  tf_.resize(n);
  tn_.resize(n);
  tb_.resize(n);
  f_.resize(n);
  b_.resize(n);
  for (int i = 0; i <= n; ++i) a_[i] = slots_of(chain.activation_bytes(i), slot_bytes);
  for (int i = 0; i < n; ++i) {
    const Stage& st = chain.stages[i];
    s_[i] = slots_of(st.saved_bytes, slot_bytes);
    tf_[i] = slots_of(st.forward_temp_bytes, slot_bytes);
    tn_[i] = slots_of(st.nograd_forward_temp_bytes, slot_bytes);
    tb_[i] = slots_of(st.backward_temp_bytes, slot_bytes);
    f_[i] = st.forward_time;
    b_[i] = st.backward_time;
  }
  row_start_.resize(n);
  for (int i = 0, start = 0; i < n; start += n - i, ++i) row_start_[i] = start;
  least_.assign(pairs, capacity + 1);
  // Every entry is written below, so no initialisation is needed here.
  value_.resize(static_cast<size_t>(pairs) * width_);
  choice_.resize(static_cast<size_t>(pairs) * width_);
  std::vector<double> lower(pairs);             // sum of f + b over i..l: no recomputation
  std::vector<std::int64_t> keep_all(pairs);   // least m at which keeping every stage fits

  const std::int64_t top_limit = capacity + 1;
  for (int d = 0; d < n; ++d) {
    for (int i = 0; i + d < n; ++i) {
      const int l = i + d;
      const int p = pair(i, l);
      // The gradient present while stages i..l run forward: delta_{l+1},
      // except above the loss, whose gradient appears only at the Loss op.
      const std::int64_t grad = l < n - 1 ? a_[l + 1] : 0;
      const std::int64_t forward_all_need = grad + s_[i] + tf_[i];
      const std::int64_t backward_need = s_[i] + a_[i + 1] + a_[i] + tb_[i];
      std::int64_t ka = std::max(forward_all_need, backward_need);
      lower[p] = f_[i] + b_[i];
      if (d > 0) {
        ka = std::max(ka, s_[i] + keep_all[pair(i + 1, l)]);
        lower[p] += lower[pair(i + 1, l)];
      }
      keep_all[p] = ka;
      const std::int64_t top = std::min(ka, top_limit);  // [top, capacity]: keep everything
      double* v = values(i, l);
      std::int16_t* c = choices(i, l);
      std::fill(v, v + top, kInfinity);
      std::fill(c, c + top, std::int16_t{-1});
      std::int64_t least = top;

      if (d > 0) {
        // Keep stage i whole (F_all), solve i+1..l on what is left, then B(i).
        const std::int64_t keep_start =
            std::max({forward_all_need, backward_need, s_[i] + least_[pair(i + 1, l)]});
        if (keep_start < top) {
          const double* rest = values(i + 1, l);
          const double own = f_[i] + b_[i];
          for (std::int64_t m = keep_start; m < top; ++m) {
            v[m] = own + rest[m - s_[i]];
            c[m] = 0;
          }
          computed_ += top - keep_start;
          least = std::min(least, keep_start);
        }
        // Checkpoint at j: F_ck(i), F_n(i+1..j-1) keep only x_i and x_j;
        // solve j..l with x_j held, then i..j-1 again with delta_j.
        std::int64_t forward_peak = a_[i + 1] + tn_[i];
        double forward_time = 0;
        for (int j = i + 1; j <= l; ++j) {
          forward_time += f_[j - 1];
          if (j > i + 1) forward_peak = std::max(forward_peak, a_[j - 1] + a_[j] + tn_[j - 1]);
          const std::int64_t start =
              std::max({grad + forward_peak, a_[j] + least_[pair(j, l)], least_[pair(i, j - 1)]});
          if (start >= top) continue;
          const double* later = values(j, l);
          const double* again = values(i, j - 1);
          const std::int64_t aj = a_[j];
          for (std::int64_t m = start; m < top; ++m) {
            const double t = forward_time + later[m - aj] + again[m];
            if (t < v[m]) {
              v[m] = t;
              c[m] = static_cast<std::int16_t>(j);
            }
          }
          computed_ += top - start;
          least = std::min(least, start);
        }
      }
      std::fill(v + top, v + width_, lower[p]);
      std::fill(c + top, c + width_, std::int16_t{0});
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
  const std::int16_t c = choice(i, l, m);
  assert(c >= 0);
  if (i == l) {
    out.forward_all(i);
    if (i == n_ - 1) out.loss();
    out.backward(i);
  } else if (c == 0) {
    out.forward_all(i);
    emit(i + 1, l, m - s_[i], out);
    out.backward(i);
  } else {
    const int j = c;
    out.forward_checkpoint(i);
    for (int k = i + 1; k < j; ++k) out.forward_none(k);
    emit(j, l, m - a_[j], out);
    emit(i, j - 1, m, out);
  }
}

}  // namespace memtrain::plan
