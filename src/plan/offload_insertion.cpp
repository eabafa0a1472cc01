#include "plan/offload_insertion.h"

#include <vector>

#include "sim/simulator.h"

namespace memtrain::plan {

namespace {

bool reads(const Op& op, int j) {
  switch (op.kind) {
    case OpKind::ForwardAll:
    case OpKind::ForwardCheckpoint:
    case OpKind::ForwardNone:
    case OpKind::Backward: return op.stage == j;
    default: return false;
  }
}

// The op frees an x_j it reads when x_j is held on its own.
bool frees(const Op& op, int j) {
  return op.stage == j && (op.kind == OpKind::ForwardNone || op.kind == OpKind::Backward);
}

bool produces_alone(const Op& op, int j) {
  return op.stage == j - 1 && (op.kind == OpKind::ForwardCheckpoint || op.kind == OpKind::ForwardNone);
}

}  // namespace

Schedule with_hidden_offloads(const Chain& chain, const Schedule& schedule) {
  if (!(chain.device_to_host_bandwidth > 0) || !(chain.host_to_device_bandwidth > 0)) return schedule;
  const sim::SimResult timeline = sim::simulate(chain, schedule, true);
  const auto& ops = schedule.ops;
  const int count = static_cast<int>(ops.size());
  auto start = [&](int k) { return k == 0 ? 0.0 : timeline.ops[k - 1].end_time; };
  // before[k] / after[k]: ops to insert before / after op k.
  std::vector<std::vector<Op>> before(count + 1), after(count);

  for (int p = 0; p < count; ++p) {
    const int j = ops[p].stage + 1;
    if (!produces_alone(ops[p], j) || j < 1) continue;
    // First read after production, then the next one: the idle gap between.
    int r1 = p + 1;
    while (r1 < count && !reads(ops[r1], j)) ++r1;
    if (r1 >= count || frees(ops[r1], j)) continue;
    int r2 = r1 + 1;
    while (r2 < count && !reads(ops[r2], j)) ++r2;
    if (r2 >= count) continue;
    const Bytes bytes = chain.activation_bytes(j);
    const double out = static_cast<double>(bytes) / chain.device_to_host_bandwidth;
    const double back = static_cast<double>(bytes) / chain.host_to_device_bandwidth;
    const double copy_start = timeline.ops[r1].end_time;
    // Release before the first op that starts once the copy has ended.
    int q = r1 + 1;
    while (q < r2 && start(q) < copy_start + out) ++q;
    // Prefetch before the last op that leaves time for the copy back.
    int u = r2;
    while (u > q && start(r2) - start(u) < back) --u;
    if (start(r2) - start(u) < back || u <= q) continue;  // the gap hides no freed op
    after[r1].push_back({OpKind::Offload, j});
    before[q].push_back({OpKind::Release, j});
    before[u].push_back({OpKind::Prefetch, j});
  }

  Schedule out;
  for (int k = 0; k < count; ++k) {
    for (const Op& op : before[k]) out.ops.push_back(op);
    out.ops.push_back(ops[k]);
    for (const Op& op : after[k]) out.ops.push_back(op);
  }
  return out;
}

}  // namespace memtrain::plan
