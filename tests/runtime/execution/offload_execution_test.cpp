#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "plan/optimal_planner.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"
#include "support/offload_schedules.h"
#include "support/rig.h"

namespace memtrain::runtime {
namespace {

using testing::offloading_every_checkpoint;
using testing::Rig;

TEST(OffloadExecution, OffloadedStepsComputeExactlyWhatAPlainStepDoes) {
  const int n = 6;
  Rig plain;
  const ExecutionResult reference = plain.run(plan::schedule_keeping_everything(n), plain.batch(2));
  Rig without_offload;
  const ExecutionResult checkpointed =
      without_offload.run(plan::schedule_checkpointing_everything(n), without_offload.batch(2));
  for (bool late : {false, true}) {
    const Schedule s = offloading_every_checkpoint(n, late);
    Rig rig;
    const ExecutionResult r = rig.run(s, rig.batch(2));
    testing::expect_same_step(plain, reference, rig, r, s.to_string());
    EXPECT_EQ(rig.memory.host().live(), 0) << "every host copy is freed once it is back";
    EXPECT_GT(rig.memory.host().peak(), 0);
    // Each x_j went out and came back.
    Bytes moved = 0;
    for (const OpRecord& rec : r.ops) {
      if (rec.op.kind == OpKind::Offload) moved += 2 * rec.input_bytes;
    }
    EXPECT_GT(moved, 0);
    EXPECT_EQ(r.copies.bytes(), moved);
    EXPECT_GT(r.copies.seconds(), 0);
    // Releases wait for copies to host; compute waits for copies back.
    Seconds release_waits = 0, other_waits = 0;
    for (const OpRecord& rec : r.ops) {
      (rec.op.kind == OpKind::Release ? release_waits : other_waits) += rec.wait_seconds;
    }
    EXPECT_GT(release_waits, 0);
    EXPECT_NEAR(r.copies.to_host_stall_seconds, release_waits, 1e-9);
    EXPECT_NEAR(r.copies.stall_seconds() - r.copies.to_host_stall_seconds, other_waits, 1e-9);
    EXPECT_LE(r.peak, checkpointed.peak) << "offloading never needs more device memory";
    if (late) {
      EXPECT_LT(r.peak, checkpointed.peak) << "with x_j on the host until its recompute";
    }
  }
}

// The schedules the dynamic program with offloads emits (checkpoints out over
// their forward segment, back during the last backward of the solve after
// it, the same x_i sometimes out twice) run exactly like a plain step.
TEST(OffloadExecution, TheDynamicProgramsOffloadingSchedulesComputeExactlyWhatAPlainStepDoes) {
  const int n = 6;
  Rig plain;
  const ExecutionResult reference = plain.run(plan::schedule_keeping_everything(n), plain.batch(2));
  std::vector<Schedule> distinct;
  for (std::uint32_t seed = 1; seed <= 20 && distinct.size() < 6; ++seed) {
    Chain c = testing::random_chain(n, seed);
    c.device_to_host_bandwidth = c.host_to_device_bandwidth = 300;
    const Bytes top = sim::simulate(c, plan::schedule_keeping_everything(n)).peak_bytes;
    plan::OptimalPlanner planner({}, false, true);
    for (int k = 3; k <= 9; ++k) {
      const Plan p = planner.plan({c, top * k / 10});
      const bool offloads = std::any_of(p.schedule.ops.begin(), p.schedule.ops.end(),
                                        [](const Op& op) { return op.kind == OpKind::Offload; });
      if (p.feasible && offloads && std::find(distinct.begin(), distinct.end(), p.schedule) == distinct.end()) {
        distinct.push_back(p.schedule);
      }
    }
  }
  ASSERT_GE(distinct.size(), 3u);
  for (const Schedule& s : distinct) {
    Rig rig;
    const ExecutionResult r = rig.run(s, rig.batch(2));
    testing::expect_same_step(plain, reference, rig, r, s.to_string());
    EXPECT_EQ(rig.memory.host().live(), 0) << s.to_string();
    EXPECT_GT(r.copies.bytes(), 0) << s.to_string();
  }
}

TEST(OffloadExecution, AStepThatFailsWithCopiesInFlightLeavesNothingBehind) {
  Rig rig;
  const Batch batch = rig.batch();
  const Bytes device_before = rig.memory.live();
  Schedule s;
  s.forward_checkpoint(0);
  s.forward_checkpoint(1);
  s.offload(1);  // still copying when the next op fails
  s.backward(3);
  EXPECT_THROW(rig.run(s, batch), Error);
  EXPECT_EQ(rig.memory.live(), device_before) << "the copy engine holds no device tensor";
  EXPECT_EQ(rig.memory.host().live(), 0);
}

TEST(OffloadExecution, RefusesWhatItCannotRun) {
  Rig rig;
  const int n = 6;
  Schedule no_prefetch;
  for (const Op& op : offloading_every_checkpoint(n, true).ops) {
    if (op.kind != OpKind::Prefetch) no_prefetch.ops.push_back(op);
  }
  EXPECT_THROW(rig.run(no_prefetch, rig.batch()), Error);  // the recompute finds no input
  Schedule batch_out;
  batch_out.offload(0);
  EXPECT_THROW(rig.run(batch_out, rig.batch()), Error);
}

}  // namespace
}  // namespace memtrain::runtime
