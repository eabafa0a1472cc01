#include "plan/offload_insertion.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "sim/simulator.h"

namespace memtrain::plan {

namespace {

bool reads(const Op& op, int j, int micro) {
  switch (op.kind) {
    case OpKind::ForwardAll:
    case OpKind::ForwardCheckpoint:
    case OpKind::ForwardNone:
    case OpKind::Backward: return op.stage == j && op.micro == micro;
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

// One stored tensor that could move: x_j (saved == false) or what F_all(j)
// kept beyond its output (saved == true).
struct Candidate {
  int stage;
  int micro;
  bool saved;
  Bytes bytes;
  int offload_after;  // op index the copy to host follows
  int read;           // op index of the next read, which needs it back
  int release_before = -1;
};

}  // namespace

Schedule with_hidden_offloads(const Chain& chain, const Schedule& schedule) {
  if (!(chain.device_to_host_bandwidth > 0) || !(chain.host_to_device_bandwidth > 0)) return schedule;
  const sim::SimResult timeline = sim::simulate(chain, schedule, true);
  const auto& ops = schedule.ops;
  const int count = static_cast<int>(ops.size());
  auto start = [&](int k) { return k == 0 ? 0.0 : timeline.ops[k - 1].end_time; };
  auto end = [&](int k) { return timeline.ops[k].end_time; };

  std::vector<Candidate> candidates;
  for (int p = 0; p < count; ++p) {
    const Op& op = ops[p];
    if (op.kind == OpKind::ForwardAll) {
      const Bytes bytes = chain.saved_beyond_output(op.stage, op.variant);
      int read = p + 1;
      while (read < count && !(ops[read].kind == OpKind::Backward && reads(ops[read], op.stage, op.micro))) ++read;
      if (bytes > 0 && read < count) candidates.push_back({op.stage, op.micro, true, bytes, p, read});
      continue;
    }
    const int j = op.stage + 1;
    if (!produces_alone(op, j)) continue;
    // First read after production, then the next one: the idle gap between.
    int r1 = p + 1;
    while (r1 < count && !reads(ops[r1], j, op.micro)) ++r1;
    if (r1 >= count || frees(ops[r1], j)) continue;
    int r2 = r1 + 1;
    while (r2 < count && !reads(ops[r2], j, op.micro)) ++r2;
    if (r2 < count) candidates.push_back({j, op.micro, false, chain.activation_bytes(j), r1, r2});
  }

  // Copies to host, in the order they can start, one at a time.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& x, const Candidate& y) { return x.offload_after < y.offload_after; });
  std::vector<Candidate> out_ok;
  Seconds d2h_free = 0;
  for (Candidate c : candidates) {
    const Seconds copy_end =
        std::max(end(c.offload_after), d2h_free) + static_cast<double>(c.bytes) / chain.device_to_host_bandwidth;
    int q = c.offload_after + 1;
    while (q < c.read && start(q) < copy_end) ++q;
    if (q >= c.read) continue;  // the copy would not end before the read
    c.release_before = q;
    d2h_free = copy_end;
    out_ok.push_back(c);
  }
  // Copies back, latest read first, each ending before its read and before
  // the next copy back starts.
  std::stable_sort(out_ok.begin(), out_ok.end(),
                   [](const Candidate& x, const Candidate& y) { return x.read > y.read; });
  std::vector<std::vector<Op>> releases(count), prefetches(count), after(count);
  Seconds h2d_next = std::numeric_limits<double>::infinity();
  for (const Candidate& c : out_ok) {
    const Seconds back = static_cast<double>(c.bytes) / chain.host_to_device_bandwidth;
    const Seconds latest_start = std::min(start(c.read), h2d_next) - back;
    int u = c.read;
    while (u > c.release_before && start(u) > latest_start) --u;
    if (u <= c.release_before || start(u) > latest_start) continue;  // the gap frees nothing
    h2d_next = start(u);
    after[c.offload_after].push_back({c.saved ? OpKind::OffloadSaved : OpKind::Offload, c.stage, 0, c.micro});
    releases[c.release_before].push_back({c.saved ? OpKind::ReleaseSaved : OpKind::Release, c.stage, 0, c.micro});
    prefetches[u].push_back({c.saved ? OpKind::PrefetchSaved : OpKind::Prefetch, c.stage, 0, c.micro});
  }

  Schedule result;
  for (int k = 0; k < count; ++k) {
    // Frees before allocations, so both never sit on the device at once.
    for (const Op& op : releases[k]) result.ops.push_back(op);
    for (auto it = prefetches[k].rbegin(); it != prefetches[k].rend(); ++it) result.ops.push_back(*it);
    result.ops.push_back(ops[k]);
    for (const Op& op : after[k]) result.ops.push_back(op);
  }
  return result;
}

bool moves_tensor_of(const Op& op, const Op& offload) {
  const bool saved = offload.kind == OpKind::OffloadSaved;
  const bool same_kind =
      saved ? (op.kind == OpKind::OffloadSaved || op.kind == OpKind::ReleaseSaved || op.kind == OpKind::PrefetchSaved)
            : (op.kind == OpKind::Offload || op.kind == OpKind::Release || op.kind == OpKind::Prefetch);
  return same_kind && op.stage == offload.stage && op.micro == offload.micro;
}

Schedule without_needless_offloads(const Chain& chain, const Schedule& schedule, Bytes budget) {
  Schedule current = schedule;
  const sim::SimResult start = sim::simulate(chain, current);
  const Seconds time = start.time;
  std::vector<Op> offloads;
  for (const Op& op : schedule.ops) {
    if (op.kind == OpKind::Offload || op.kind == OpKind::OffloadSaved) offloads.push_back(op);
  }
  for (auto it = offloads.rbegin(); it != offloads.rend(); ++it) {
    Schedule fewer;
    for (const Op& op : current.ops) {
      if (!moves_tensor_of(op, *it)) fewer.ops.push_back(op);
    }
    const sim::SimResult r = sim::simulate(chain, fewer);
    if (r.peak_bytes <= budget && r.time <= time) current = std::move(fewer);
  }
  return current;
}

}  // namespace memtrain::plan
