#include "plan/tensile_planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "plan/offload_insertion.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"

namespace memtrain::plan {

namespace {

Bytes tensor_bytes(const Chain& chain, const Op& offload) {
  return offload.kind == OpKind::OffloadSaved ? chain.saved_beyond_output(offload.stage)
                                              : chain.activation_bytes(offload.stage);
}

// `swapped` without the copies of the tensors `left` (offloads) would move.
Schedule without_swaps(const Schedule& swapped, std::vector<Op>::const_iterator left,
                       std::vector<Op>::const_iterator end) {
  Schedule s;
  for (const Op& op : swapped.ops) {
    if (std::none_of(left, end, [&](const Op& offload) { return moves_tensor_of(op, offload); })) s.ops.push_back(op);
  }
  return s;
}

// `base` with the fewest of its hideable swaps, largest tensor first, that
// bring its peak within `budget`; all of them when none suffice. `peak` gets
// the result's simulated peak.
Schedule swaps_until_fit(const Chain& chain, const Schedule& base, Bytes budget, Bytes* peak) {
  const Schedule swapped = with_hidden_offloads(chain, base);
  const sim::SimResult all = sim::simulate(chain, swapped);
  *peak = all.peak_bytes;
  if (all.peak_bytes > budget) return swapped;  // no subset does better: recompute next
  std::vector<Op> candidates;
  for (const Op& op : swapped.ops) {
    if (op.kind == OpKind::Offload || op.kind == OpKind::OffloadSaved) candidates.push_back(op);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Op& a, const Op& b) { return tensor_bytes(chain, a) > tensor_bytes(chain, b); });
  // The first k candidates swapped, k = 0, 1, ...: all of them fit.
  for (auto left = candidates.cbegin(); left != candidates.cend(); ++left) {
    Schedule s = without_swaps(swapped, left, candidates.cend());
    const sim::SimResult r = sim::simulate(chain, s);
    if (r.peak_bytes <= budget) {
      *peak = r.peak_bytes;
      return s;
    }
  }
  return swapped;
}

}  // namespace

std::vector<Bytes> swappable_tensor_bytes(const Chain& chain) {
  // The activations are the same wherever the weights live; keeping
  // everything has every weight on the device (keep_everything_peak()).
  Chain on_device = chain;
  on_device.weights_on_host = on_device.updates_inline = false;
  std::vector<Bytes> out;
  for (const Op& op : with_hidden_offloads(on_device, schedule_keeping_everything(chain.size())).ops) {
    if (op.kind == OpKind::Offload || op.kind == OpKind::OffloadSaved) out.push_back(tensor_bytes(on_device, op));
  }
  std::sort(out.begin(), out.end(), std::greater<Bytes>());
  return out;
}

Plan TensilePlanner::plan(const PlanRequest& request) {
  const Chain& chain = request.chain;
  const int n = chain.size();
  // Recomputation candidates, most saved bytes per second of recomputation
  // first; the loss stage is always kept (schedule_with_recompute).
  std::vector<int> order(static_cast<size_t>(std::max(n - 1, 0)));
  std::iota(order.begin(), order.end(), 0);
  auto value = [&](int i) {
    const Seconds t = std::max(chain.stages[i].forward_time, std::numeric_limits<double>::min());
    return static_cast<double>(chain.saved_beyond_output(i)) / t;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return value(a) > value(b); });

  std::vector<char> recompute(static_cast<size_t>(n), 0);
  Bytes least = std::numeric_limits<Bytes>::max();
  Schedule last;
  for (size_t r = 0;; ++r) {
    Bytes peak = 0;
    last = swaps_until_fit(chain, schedule_with_recompute(recompute), request.budget, &peak);
    if (peak <= request.budget) return priced_plan(name(), chain, last, request.budget);
    least = std::min(least, peak);
    if (r == order.size()) break;
    recompute[static_cast<size_t>(order[r])] = 1;
  }
  return priced_plan(name(), chain, last, request.budget, least);
}

}  // namespace memtrain::plan
