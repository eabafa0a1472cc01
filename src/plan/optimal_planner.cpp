#include "plan/optimal_planner.h"

#include <algorithm>
#include <cstdio>

#include "plan/schedule_builders.h"

namespace memtrain::plan {

Schedule OptimalPlanner::keeping_everything_fastest(const Chain& chain) const {
  Schedule s = schedule_keeping_everything(chain.size());
  if (!variants_) return s;
  for (Op& op : s.ops) {
    if (op.kind != OpKind::ForwardAll) continue;
    const Stage& st = chain.stages[op.stage];
    for (int v = 1; v < st.variant_count(); ++v) {
      const StageVariant a = st.variant(v), b = st.variant(op.variant);
      const double ta = a.forward_time + a.backward_time, tb = b.forward_time + b.backward_time;
      if (ta < tb) op.variant = v;  // ties: the plain stage
    }
  }
  return s;
}

Bytes OptimalPlanner::slot_size(Bytes available) const {
  if (options_.slot_bytes > 0) return options_.slot_bytes;
  const std::int64_t slots = std::max<std::int64_t>(1, options_.slots);
  return std::max<Bytes>(1, (available + slots - 1) / slots);
}

Plan OptimalPlanner::plan(const PlanRequest& request) {
  const Chain& chain = request.chain;
  const int n = chain.size();
  // Bytes held outside the table: the resident weights and state, and the batch.
  const Bytes outside = chain.persistent_bytes() + chain.activation_bytes(0);
  const Bytes update_peak = chain.persistent_bytes() + chain.update_temp_bytes;
  const Bytes available = request.budget - outside;
  last_value_ = PersistentDp::kInfinity;
  const bool offloads = offloads_ && chain.device_to_host_bandwidth > 0 && chain.host_to_device_bandwidth > 0;

  // Rounding sizes up to slots can make the table miss a budget that keeping
  // everything fits; that schedule (each stage as its fastest variant) is the
  // optimum whenever it fits.
  Plan keep = priced_plan(name(), chain, keeping_everything_fastest(chain), request.budget);
  if (keep.feasible) {
    last_value_ = keep.time;
    keep.note = "everything fits: nothing recomputed";
    return keep;
  }
  if (available > 0 && update_peak <= request.budget) {
    const Bytes slot = slot_size(available);
    const std::int64_t capacity = available / slot;
    // Each size rounds up by less than a slot, and a peak sums at most
    // 2n + 3 of them, so the table is built that far past the budget and the
    // Simulator, which counts bytes exactly, picks the best schedule that
    // truly fits. At `capacity` itself the fit is guaranteed.
    const std::int64_t slack = slot == 1 ? 0 : 2 * static_cast<std::int64_t>(n) + 4;
    dp_.solve(chain, slot, capacity + slack, variants_, offloads);
    for (std::int64_t m = capacity + slack; m >= capacity; --m) {
      const double value = dp_.value(0, n - 1, m);
      if (value == PersistentDp::kInfinity) break;
      if (m > capacity && value == dp_.value(0, n - 1, m - 1)) continue;  // no faster than m - 1
      Plan p = priced_plan(name(), chain, dp_.schedule(m), request.budget);
      if (!p.feasible) continue;
      last_value_ = value;
      char note[160];
      int offloaded = 0;
      for (const Op& op : p.schedule.ops) offloaded += op.kind == OpKind::Offload;
      std::snprintf(note, sizeof note, "dynamic program over %lld slots of %lld bytes: %d recomputed forwards%s",
                    static_cast<long long>(m), static_cast<long long>(slot), p.schedule.recomputed_forwards(n),
                    offloads ? (", " + std::to_string(offloaded) + " checkpoints offloaded").c_str() : "");
      p.note = note;
      return p;
    }
  }
  // Nothing fits. Find the least budget at the resolution the keep-everything
  // peak gives, so the answer does not depend on how short the budget was.
  const Bytes keep_all_peak = keep.peak_bytes;
  const Bytes full = std::max<Bytes>(1, keep_all_peak - outside);
  const Bytes slot = slot_size(full);
  dp_.solve(chain, slot, (full + slot - 1) / slot, variants_, offloads);
  const std::int64_t least_slots = dp_.least_slots(0, n - 1);
  const Bytes least = std::max(update_peak, outside + least_slots * slot);
  // At this coarser resolution the least may come out at or below the
  // budget the finer one just missed; all that is known then is "more".
  return priced_plan(name(), chain, schedule_checkpointing_everything(n), request.budget,
                     std::max(least, request.budget + 1));
}

}  // namespace memtrain::plan
