#include "plan/weight_swap_schedules.h"

#include "core/error.h"

namespace memtrain::plan {

Schedule per_layer_swap_schedule(int n, int micro_batches, bool lookahead, bool forward_last_without_grad) {
  Schedule s;
  // Fetching ahead: stage `next`'s weights come in before `current` computes.
  auto fetch_ahead = [&](int next) {
    if (lookahead && next >= 0 && next < n) s.fetch_weights(next);
  };
  for (int m = 0; m < micro_batches; ++m) {
    s.fetch_weights(0);
    for (int i = 0; i + 1 < n; ++i) {
      fetch_ahead(i + 1);
      s.forward_checkpoint(i, m);
      s.drop_weights(i);
      if (!lookahead) s.fetch_weights(i + 1);
    }
    if (forward_last_without_grad) {
      s.forward_checkpoint(n - 1, m);
      s.drop_weights(n - 1);
    }
    for (int i = n - 1; i >= 0; --i) {
      // The last stage's weights are still there unless its forward without grad dropped them.
      const bool still_there = i == n - 1 && !forward_last_without_grad;
      if (!still_there && (!lookahead || i == n - 1)) s.fetch_weights(i);
      if (m > 0) s.fetch_grads(i);
      fetch_ahead(i - 1);
      s.forward_all(i, 0, m);
      if (i == n - 1) s.loss(m);
      s.backward(i, m);
      s.offload_grads(i);
      s.drop_weights(i);
      if (m == micro_batches - 1) s.update(i);
    }
  }
  return s;
}

Schedule grouped_swap_schedule(int n, int micro_batches, const std::vector<int>& starts, bool lookahead,
                               bool offload_pack_inputs) {
  MEMTRAIN_ASSERT(!starts.empty() && starts[0] == 0, "grouped_swap_schedule: packs start at stage 0");
  const int packs = static_cast<int>(starts.size());
  auto first = [&](int p) { return starts[p]; };
  auto end = [&](int p) { return p + 1 < packs ? starts[p + 1] : n; };
  Schedule s;
  auto fetch = [&](int p) {
    for (int i = first(p); i < end(p); ++i) s.fetch_weights(i);
  };
  auto finish = [&](int p) {  // gradients out, weights dropped, update on the host
    for (int i = first(p); i < end(p); ++i) s.offload_grads(i);
  };
  auto drop_and_update = [&](int p) {
    for (int i = first(p); i < end(p); ++i) s.drop_weights(i);
    for (int i = first(p); i < end(p); ++i) s.update(i);
  };
  // Pack p's input goes to host memory and back (not x_0, the batch).
  auto offloads = [&](int p) { return offload_pack_inputs && first(p) > 0; };
  // Forward through every pack but the last: each micro-batch keeps the
  // pack's input and hands its output on.
  fetch(0);
  // The last micro-batch's release of a pack waits for the next pack's
  // first forward, so its copy has compute to hide under too.
  int deferred_release = -1;
  auto release_deferred = [&] {
    if (deferred_release >= 0) s.release(deferred_release, micro_batches - 1);
    deferred_release = -1;
  };
  for (int p = 0; p + 1 < packs; ++p) {
    if (lookahead) fetch(p + 1);
    for (int m = 0; m < micro_batches; ++m) {
      s.forward_checkpoint(first(p), m);
      if (offloads(p)) s.offload(first(p), m);
      for (int i = first(p) + 1; i < end(p); ++i) s.forward_none(i, m);
      // The copy of the previous micro-batch's input has had this one's
      // forward to hide under.
      if (offloads(p) && m > 0) s.release(first(p), m - 1);
      if (m == 0) release_deferred();
    }
    if (offloads(p)) deferred_release = first(p);
    for (int i = first(p); i < end(p); ++i) s.drop_weights(i);
    if (!lookahead) fetch(p + 1);
  }
  // Pack p's first micro-batch input comes back during the last micro-batch
  // of pack p+1's backward.
  auto prefetch_ahead = [&](int p) {
    if (p >= 0 && offloads(p)) s.prefetch(first(p), 0);
  };
  // The last pack: forward and backward per micro-batch, its weights staying.
  for (int m = 0; m < micro_batches; ++m) {
    for (int i = first(packs - 1); i < n; ++i) s.forward_all(i, 0, m);
    if (m == 0) release_deferred();
    if (m == micro_batches - 1) prefetch_ahead(packs - 2);
    s.loss(m);
    for (int i = n - 1; i >= first(packs - 1); --i) s.backward(i, m);
  }
  // The other packs backward, each recomputed from its input.
  for (int p = packs - 2; p >= 0; --p) {
    finish(p + 1);
    // Ahead: pack p's weights come in while pack p+1's gradients go out;
    // otherwise one pack at a time on the device.
    if (lookahead) fetch(p);
    drop_and_update(p + 1);
    if (!lookahead) fetch(p);
    for (int m = 0; m < micro_batches; ++m) {
      // The next micro-batch's input comes back while this one computes.
      if (offloads(p) && m + 1 < micro_batches) s.prefetch(first(p), m + 1);
      if (m == micro_batches - 1) prefetch_ahead(p - 1);
      for (int i = first(p); i < end(p); ++i) s.forward_all(i, 0, m);
      for (int i = end(p) - 1; i >= first(p); --i) s.backward(i, m);
    }
  }
  finish(0);
  drop_and_update(0);
  return s;
}

Schedule weight_swap_collection_schedule(int n, int micro_batches) {
  return per_layer_swap_schedule(n, micro_batches, false, /*forward_last_without_grad=*/true);
}

std::vector<int> balanced_pack_starts(const Chain& chain, int packs) {
  const int n = chain.size();
  MEMTRAIN_ASSERT(packs >= 1 && packs <= n, "balanced_pack_starts: 1 to n packs");
  Bytes total = 0;
  for (const Stage& st : chain.stages) total += st.param_bytes;
  std::vector<int> starts{0};
  Bytes so_far = 0;
  for (int i = 0; i < n && static_cast<int>(starts.size()) < packs; ++i) {
    so_far += chain.stages[i].param_bytes;
    const int left = n - (i + 1);                                // stages after i
    const int needed = packs - static_cast<int>(starts.size());  // packs still to start
    // Cut after i once this pack holds its share, or when every remaining stage must start a pack.
    const double share = static_cast<double>(total) * static_cast<double>(starts.size()) / packs;
    if (left > 0 && (static_cast<double>(so_far) >= share || left == needed)) starts.push_back(i + 1);
  }
  return starts;
}

}  // namespace memtrain::plan
