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
//
// With `offloads` (the `swap` planner's exact candidate), a checkpointed
// activation x_i stored on its own may also go to host memory while the
// stages after its forward segment are solved: Offload(i) before that
// segment, Release(i) after it, Prefetch(i) before the last backward of the
// solve that follows, and the recomputation from x_i then waits for it. The
// table prices both copies on the chain's copy engines exactly as the
// Simulator does (OPTIMAL.md, "Offload as a third option").
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
  // Throws UsageError for `offloads` on a chain without both link bandwidths,
  // or together with `variants`.
  void solve(const Chain& chain, Bytes slot_bytes, std::int64_t capacity, bool variants = false, bool offloads = false);

  // Least time for stages i..l with m slots available (see OPTIMAL.md), or
  // kInfinity.
  // `own`: x_i is stored on its own (the output of a forward without grad),
  // so with offloads it may go to host memory; x_0, the batch, never is.
  double value(int i, int l, std::int64_t m, bool own = false) const;
  // Least m with value(i, l, m) finite; capacity + 1 when there is none.
  std::int64_t least_slots(int i, int l, bool own = false) const { return leasts(own)[pair(i, l)]; }
  // The schedule that achieves value(0, n-1, m); m must be feasible.
  Schedule schedule(std::int64_t m) const;

  // Only checkpoints that keep one stage's input: a stage is recomputed
  // right before its own backward, never on the way to a later stage's
  // (PlannerOptions::local_recompute). Applies from the next solve.
  void set_local_recompute(bool local) { local_ = local; }

  std::int64_t capacity() const { return capacity_; }
  // Table entries actually computed by the last solve, summed over the
  // branches tried (the rest were pruned: below a branch's least feasible m
  // or above the m at which keeping everything fits).
  std::int64_t computed_entries() const { return computed_; }

 private:
  int pair(int i, int l) const { return row_start_[i] + (l - i); }
  // The last stage j a checkpoint of stages i..l may resume at.
  int last_checkpoint(int i, int l) const { return local_ ? std::min(l, i + 1) : l; }
  // Two tables with offloads: x_i stored on its own (`own`) or inside the
  // previous stage's kept x̄ (only the first can be offloaded); one without.
  const std::vector<double>& table(bool own) const { return own && offloads_ ? own_value_ : value_; }
  const std::vector<std::int64_t>& leasts(bool own) const { return own && offloads_ ? own_least_ : least_; }
  const double* values(int i, int l, bool own = false) const {
    return &table(own)[static_cast<size_t>(pair(i, l)) * width_];
  }
  double* values(int i, int l, bool own = false) {
    return const_cast<double*>(static_cast<const PersistentDp*>(this)->values(i, l, own));
  }
  // The forward pass F_ck(i), F_n(i+1..j-1) of a checkpoint at j, for each
  // j in i+1..l (entry j-i-1): its peak and time, summed in one order for
  // solve and emit alike so that emit finds the table's values bit for bit.
  struct Segment {
    std::int64_t peak;
    double time;
  };
  void forward_segments(int i, int l, std::vector<Segment>& out) const;
  // solve's parts: refusing what it cannot solve, and the chain's stages
  // and activations in slots (the variants and copy times it plans with).
  static void check_request(const Chain& chain, Bytes slot_bytes, bool variants, bool offloads);
  void load(const Chain& chain, Bytes slot_bytes, std::int64_t capacity, bool variants, bool offloads);
  // Fills the table `own` for stages i..l; `top` and `lower` as in solve,
  // `segments` from forward_segments(i, l) (one computation serves both tables).
  void fill(int i, int l, bool own, std::int64_t top, double lower, const std::vector<Segment>& segments);
  // The gradient present while stages i..l run forward.
  std::int64_t gradient(int l) const { return l < n_ - 1 ? a_[l + 1] : 0; }
  // Least m at which keeping stage i whole as variant index k (into vs_...)
  // is possible, the rest i+1..l included.
  std::int64_t keep_start(int i, int l, int k) const;
  // What keeping stage i as variant index k needs, beside what is counted
  // outside: its F_all while the gradient of l+1 exists, and its B(i),
  // which holds x̄_i, delta_{i+1}, x_i and makes delta_i.
  std::int64_t forward_all_need(int l, int k) const { return gradient(l) + vs_[k] + vtf_[k]; }
  std::int64_t backward_need(int i, int k) const { return vs_[k] + a_[i + 1] + a_[i] + vtb_[k]; }
  // Least m at which checkpointing at j is possible; forward_peak is the
  // running maximum of the forward pass F_ck(i), F_n(i+1..j-1).
  std::int64_t checkpoint_start(int i, int l, int j, std::int64_t forward_peak, bool own) const;
  // The same with x_i offloaded while j..l are solved, which also needs
  // room for x_i to come back during B(j).
  std::int64_t offload_start(int i, int l, int j, std::int64_t forward_peak) const;
  bool may_offload(int i, bool own) const { return offloads_ && own && i > 0; }
  // Compute's waits for x_i's copies: out, after a forward segment of
  // `forward_time`; back, during B(j).
  double out_stall(int i, double forward_time) const { return std::max(0.0, copy_out_[i] - forward_time); }
  double in_stall(int i, int j) const { return std::max(0.0, copy_in_[i] - b_[j]); }
  // The slots the child solve gains when x_i leaves: rounded down, so
  // that a feasible entry is feasible in bytes.
  std::int64_t freed(int i) const { return a_down_[i]; }
  std::int64_t clamp(std::int64_t m) const { return std::min(m, capacity_); }
  // Emits the schedule of (i, l, m): the first branch, in the order solve
  // tries them, whose value equals the table's (the same sum of the same
  // numbers, so equal bit for bit). No choice table is kept.
  void emit(int i, int l, std::int64_t m, bool own, Schedule& out) const;

  int n_ = 0;
  bool local_ = false;  // set_local_recompute()
  std::int64_t capacity_ = 0;
  size_t width_ = 0;  // capacity + 1
  std::int64_t computed_ = 0;
  // Sizes in slots, rounded up: a[0..n], saved, fwd temp (grad / no grad), bwd temp.
  std::vector<std::int64_t> a_, tn_, a_down_;
  std::vector<double> f_, b_;
  bool offloads_ = false;
  std::vector<double> copy_out_, copy_in_;  // seconds to move x_i each way, as the Simulator prices it
  std::vector<double> own_value_;
  std::vector<std::int64_t> own_least_;
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
