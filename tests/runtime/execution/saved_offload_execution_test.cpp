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

// Note [spilling] (executor.cpp): code outside the schedule needs room
// before the backward; what the forwards with grad keep goes to host memory
// and each backward brings its own back.
TEST(SavedOffloadExecution, SpilledActivationsFreeTheirBytesAndTheStepComputesWhatAPlainOneDoes) {
  const int n = 6;
  const Schedule s = plan::schedule_keeping_everything(n);
  Rig plain;
  const ExecutionResult reference = plain.run(s, plain.batch(2));
  for (Bytes wanted : {Bytes{1}, Bytes{1} << 40}) {
    Rig rig;
    const runtime::Batch b = rig.batch(2);
    auto scope = rig.memory.activate();
    runtime::StepContext ctx;
    ctx.targets = b.targets;
    ctx.key_padding = b.key_padding;
    ctx.generator = rig.generator;
    runtime::Executor executor(*rig.model, rig.memory);
    executor.keep_saved_movable(true);
    auto run = executor.start(s, b, ctx);
    while (run->next().kind != OpKind::Loss) run->step();  // every stage kept, before the loss
    const Bytes before = rig.memory.live();
    const Bytes freed = run->spill(wanted);
    EXPECT_GT(freed, 0);
    EXPECT_EQ(before - rig.memory.live(), freed);
    EXPECT_GT(rig.memory.host().live(), 0) << "the kept tensors wait in host memory";
    if (wanted == 1) {
      EXPECT_GT(run->spill(Bytes{1} << 40), 0) << "a small request moves one stage; the rest stays";
    }
    EXPECT_EQ(run->spill(Bytes{1} << 40), 0) << "nothing is left to move";
    const ExecutionResult r = run->finish();
    testing::expect_same_step(plain, reference, rig, r, "spilled, wanting " + std::to_string(wanted));
    EXPECT_EQ(rig.memory.host().live(), 0) << "every host copy is freed once it is back";
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
