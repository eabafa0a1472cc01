// Schedules that offload, for the executor tests on CPU and on CUDA.
#pragma once

#include "core/schedule.h"
#include "plan/schedule_builders.h"

namespace memtrain::testing {

// Checkpoint every stage, and offload every checkpoint x_j (j = 1..n-2)
// right after its first read, waiting for the copy at once; prefetch it
// right after the loss (early) or right before the forward that needs it
// (late, so compute must wait for the copy).
inline Schedule offloading_every_checkpoint(int n, bool late) {
  Schedule s;
  for (const Op& op : plan::schedule_checkpointing_everything(n).ops) {
    const bool inner = op.stage >= 1 && op.stage <= n - 2;
    if (late && op.kind == OpKind::ForwardAll && inner) s.prefetch(op.stage);
    s.ops.push_back(op);
    if (op.kind == OpKind::ForwardCheckpoint && inner) {
      s.offload(op.stage);
      s.release(op.stage);
    }
    if (op.kind == OpKind::Loss && !late) {
      for (int j = 1; j <= n - 2; ++j) s.prefetch(j);
    }
  }
  return s;
}

// Keeps every stage; what stages 0..n-3 saved goes to host after their
// forward, is released two forwards later and comes back one backward early
// (or, with `late`, right before its own backward).
inline Schedule offloading_what_forwards_save(int n, bool late) {
  Schedule s;
  for (int i = 0; i < n; ++i) {
    s.forward_all(i);
    if (i >= 2 && i - 2 <= n - 3) s.release_saved(i - 2);
    if (i <= n - 3) s.offload_saved(i);
  }
  s.loss();
  for (int i = n - 1; i >= 0; --i) {
    if (late && i <= n - 3) s.prefetch_saved(i);
    if (!late && i >= 1 && i - 1 <= n - 3) s.prefetch_saved(i - 1);
    s.backward(i);
  }
  return s;
}

}  // namespace memtrain::testing
