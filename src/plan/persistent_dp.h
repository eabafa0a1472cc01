// The exact dynamic program for checkpointing a heterogeneous chain under the
// persistent memory model (Beaumont, Eyraud-Dubois, Herrmann, Joly, Shilova:
// "Optimal checkpointing for heterogeneous chains", the algorithm behind
// Rotor), with memory counted exactly as sim::simulate counts it. Its
// recurrence and why each condition is there: src/plan/OPTIMAL.md.
//
// Memory is discretised into slots; every size is rounded up to whole slots,
// so a schedule the table calls feasible is feasible in bytes too. With a
// slot of one byte the table is exact.
//
// With `variants`, keeping a stage also chooses which of its variants
// (Stage::variants, MONeT's operator variants) runs forward with grad: the
// `joint` planner. Without, every stage runs as itself: `optimal`.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/chain.h"
#include "core/schedule.h"

namespace memtrain::plan {

class PersistentDp {
 public:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();
  // Refuse tables larger than this many entries (each 8 bytes).
  static constexpr std::int64_t kMaxEntries = std::int64_t{1} << 25;

  // Fills OPT(m, i, l) for every 0 <= i <= l < n and every m in 0..capacity
  // slots of `slot_bytes` each. Throws UsageError when the table would be
  // larger than kMaxEntries. The buffers are kept for the next solve.
  void solve(const Chain& chain, Bytes slot_bytes, std::int64_t capacity, bool variants = false);

  // Least time for stages i..l with m slots available (see OPTIMAL.md), or
  // kInfinity.
  double value(int i, int l, std::int64_t m) const;
  // Least m with value(i, l, m) finite; capacity + 1 when there is none.
  std::int64_t least_slots(int i, int l) const { return least_[pair(i, l)]; }
  // The schedule that achieves value(0, n-1, m); m must be feasible.
  Schedule schedule(std::int64_t m) const;

  std::int64_t capacity() const { return capacity_; }
  // Table entries actually computed by the last solve, summed over the
  // branches tried (the rest were pruned: below a branch's least feasible m
  // or above the m at which keeping everything fits).
  std::int64_t computed_entries() const { return computed_; }

 private:
  int pair(int i, int l) const { return row_start_[i] + (l - i); }
  const double* values(int i, int l) const { return &value_[static_cast<size_t>(pair(i, l)) * width_]; }
  double* values(int i, int l) { return &value_[static_cast<size_t>(pair(i, l)) * width_]; }
  // The gradient present while stages i..l run forward.
  std::int64_t gradient(int l) const { return l < n_ - 1 ? a_[l + 1] : 0; }
  // Least m at which keeping stage i whole as variant index k (into vs_...)
  // is possible, the rest i+1..l included.
  std::int64_t keep_start(int i, int l, int k) const;
  // Least m at which checkpointing at j is possible; forward_peak is the
  // running maximum of the forward pass F_ck(i), F_n(i+1..j-1).
  std::int64_t checkpoint_start(int i, int l, int j, std::int64_t forward_peak) const;
  // Emits the schedule of (i, l, m): the first branch, in the order solve
  // tries them, whose value equals the table's (the same sum of the same
  // numbers, so equal bit for bit). No choice table is kept.
  void emit(int i, int l, std::int64_t m, Schedule& out) const;

  int n_ = 0;
  std::int64_t capacity_ = 0;
  size_t width_ = 0;  // capacity + 1
  std::int64_t computed_ = 0;
  // Sizes in slots, rounded up: a[0..n], saved, fwd temp (grad / no grad), bwd temp.
  std::vector<std::int64_t> a_, tn_;
  std::vector<double> f_, b_;
  std::vector<int> row_start_;
  std::vector<std::int64_t> least_;
  std::vector<double> value_;
  // Per variant of every stage, stage i's from var_start_[i] to var_start_[i+1]:
  // sizes in slots and f + b.
  std::vector<int> var_start_;
  std::vector<std::int64_t> vs_, vtf_, vtb_;
  std::vector<double> vtime_;
  std::vector<int> fastest_;  // per stage: the variant with the least f + b (ties: the plain stage)

};

}  // namespace memtrain::plan
