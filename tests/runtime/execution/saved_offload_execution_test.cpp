// Offloading what a forward with grad saved (OffloadSaved, ReleaseSaved,
// PrefetchSaved): real copies of the tensors autograd keeps, caught by the
// saved-tensor hooks, on the tiny tagger with dropout.
#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "support/offload_schedules.h"
#include "support/rig.h"

namespace memtrain::runtime {
namespace {

using testing::offloading_what_forwards_save;
using testing::Rig;

TEST(SavedOffloadExecution, ComputesExactlyWhatAPlainStepDoesAndFreesWhatTheModelSays) {
  const int n = 6;
  Rig plain;
  const ExecutionResult reference = plain.run(plan::schedule_keeping_everything(n), plain.batch(2));
  // s_i - a_{i+1} as the plain step measured it: what the Simulator moves.
  std::vector<Bytes> beyond_output(n, 0);
  for (const OpRecord& rec : reference.ops) {
    if (rec.op.kind == OpKind::ForwardAll)
      beyond_output[rec.op.stage] = rec.live_after - rec.live_before - rec.output_bytes;
  }
  for (bool late : {false, true}) {
    const Schedule s = offloading_what_forwards_save(n, late);
    Rig rig;
    const ExecutionResult r = rig.run(s, rig.batch(2));
    testing::expect_same_step(plain, reference, rig, r, s.to_string());
    Bytes moved = 0;
    for (const OpRecord& rec : r.ops) {
      if (rec.op.kind == OpKind::OffloadSaved) {
        EXPECT_EQ(rec.input_bytes, beyond_output[rec.op.stage]) << "stage " << rec.op.stage;
        moved += rec.input_bytes;
      }
      if (rec.op.kind == OpKind::ReleaseSaved) {
        EXPECT_EQ(rec.live_before - rec.live_after, beyond_output[rec.op.stage])
            << "the release frees it, stage " << rec.op.stage;
      }
    }
    EXPECT_GT(moved, 0);
    EXPECT_EQ(r.copies.to_host_bytes, moved);
    EXPECT_EQ(r.copies.to_device_bytes, moved);
    EXPECT_EQ(rig.memory.host().live(), 0) << "every host copy is freed once it is back";
    EXPECT_LT(r.peak, reference.peak) << s.to_string();
  }
}

TEST(SavedOffloadExecution, RefusesWhatItCannotRun) {
  const int n = 6;
  auto without = [&](OpKind kind) {
    Schedule s;
    for (const Op& op : offloading_what_forwards_save(n, true).ops) {
      if (op.kind != kind) s.ops.push_back(op);
    }
    return s;
  };
  {
    Rig rig;
    EXPECT_THROW(rig.run(without(OpKind::PrefetchSaved), rig.batch()), Error);
    EXPECT_EQ(rig.memory.host().live(), 0) << "a failed step leaves nothing in host memory";
  }
  {
    Rig rig;
    EXPECT_THROW(rig.run(without(OpKind::ReleaseSaved), rig.batch()), Error);  // PreS without a release
  }
  {
    Rig rig;
    Schedule s;
    s.forward_all(0);
    s.offload_saved(0);
    s.offload_saved(0);
    EXPECT_THROW(rig.run(s, rig.batch()), Error);
    Schedule before_forward;
    before_forward.offload_saved(0);
    EXPECT_THROW(rig.run(before_forward, rig.batch()), Error);
  }
}

}  // namespace
}  // namespace memtrain::runtime
