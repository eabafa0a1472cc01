// The Simulator's copy engines, worked out by hand on a three-stage chain:
// x_1 (20 bytes) copies out in 2 s and back in 1 s.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sim/simulator.h"
#include "support/schedule_text.h"
#include "support/simulator_refusals.h"

namespace memtrain::sim {
namespace {

Chain three_stages() {
  Chain c;
  const struct {
    Bytes a, s;
    Seconds f;
  } spec[] = {{10, 40, 1}, {20, 50, 3}, {30, 24, 0.5}};
  for (int i = 0; i < 3; ++i) {
    Stage s;
    s.name = "s" + std::to_string(i);
    s.input_bytes = spec[i].a;
    s.saved_bytes = spec[i].s;
    s.forward_time = spec[i].f;
    s.backward_time = 2 * spec[i].f;
    c.stages.push_back(s);
  }
  c.stages[0].param_bytes = 100;
  c.output_bytes = 4;
  c.device_to_host_bandwidth = 10;  // bytes/s
  c.host_to_device_bandwidth = 20;
  return c;
}

using testing::parse_schedule;

const char* kPlain = "Fck0 Fall1 Fall2 L B2 B1 Fall0 B0";

TEST(OffloadSimulation, ReleaseFreesTheDeviceBytesAndWaitsForTheCopy) {
  const Chain c = three_stages();
  const SimResult plain = simulate(c, parse_schedule(kPlain));
  EXPECT_DOUBLE_EQ(plain.time, 14.5);
  EXPECT_EQ(plain.peak_bytes, 238);  // B2: 208 + delta_2 30

  // Off1 at t=4 ends at 6; Fall2 covers 0.5 s, so Rel1 waits 1.5 s.
  // Pre1 at t=7 arrives at 8 while B1 would start at 7: another 1 s.
  const SimResult r = simulate(c, parse_schedule("Fck0 Fall1 Off1 Fall2 Rel1 L B2 Pre1 B1 Fall0 B0"), true);
  EXPECT_DOUBLE_EQ(r.time, 17);
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 2.5);
  EXPECT_DOUBLE_EQ(r.copies.seconds(), 3);
  EXPECT_NEAR(r.copies.hidden_fraction(), 1 - 2.5 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(r.copies.to_host_seconds, 2);          // Off1; Pre1 is the other 1 s
  EXPECT_DOUBLE_EQ(r.copies.to_host_stall_seconds, 1.5);  // at Rel1
  EXPECT_NEAR(r.copies.hidden_fraction(CopyDirection::ToHost), 1 - 1.5 / 2, 1e-12);
  EXPECT_DOUBLE_EQ(r.copies.hidden_fraction(CopyDirection::ToDevice), 0);  // B1 waited all of Pre1
  EXPECT_EQ(r.copies.bytes(), 40);
  EXPECT_EQ(r.host_peak_bytes, 20);
  EXPECT_EQ(r.ops[2].after_bytes, 180);  // Off1 frees nothing yet
  EXPECT_EQ(r.ops[4].after_bytes, 184);  // Rel1 does
  EXPECT_EQ(r.ops[6].peak_bytes, 218);   // B2 without x_1
  EXPECT_EQ(r.ops[7].after_bytes, 210);  // Pre1 allocates at once
  EXPECT_EQ(r.peak_bytes, 230);          // B1, x_1 back
}

// Starting a copy costs compute copy_issue_time; the copy starts after it.
TEST(OffloadSimulation, StartingEachCopyCostsComputeItsIssueTime) {
  Chain c = three_stages();
  c.copy_issue_time = 0.5;
  // Off1 starts at 4.5 and ends at 6.5; Fall2 ends at 5, so Rel1 waits 1.5 s.
  // B2 ends at 7.5, Pre1 starts at 8 and arrives at 9: B1 waits 1 s. Two
  // copies, 17 s as above plus 2 x 0.5.
  const SimResult r = simulate(c, parse_schedule("Fck0 Fall1 Off1 Fall2 Rel1 L B2 Pre1 B1 Fall0 B0"));
  EXPECT_DOUBLE_EQ(r.time, 18);
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 2.5);
  // A schedule that copies nothing pays nothing.
  EXPECT_DOUBLE_EQ(simulate(c, parse_schedule(kPlain)).time, 14.5);
}

TEST(OffloadSimulation, AnEarlyPrefetchHidesUnderCompute) {
  const SimResult r = simulate(three_stages(), parse_schedule("Fck0 Fall1 Off1 Fall2 Rel1 Pre1 L B2 B1 Fall0 B0"));
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 1.5);  // only the release waits
  EXPECT_DOUBLE_EQ(r.copies.to_host_stall_seconds, 1.5);
  EXPECT_DOUBLE_EQ(r.copies.hidden_fraction(CopyDirection::ToDevice), 1);
  EXPECT_DOUBLE_EQ(r.time, 16);
}

TEST(OffloadSimulation, CopiesInOneDirectionRunOneAtATime) {
  Chain c = three_stages();
  c.stages.insert(c.stages.begin() + 2, c.stages[1]);  // x_1 and x_2 both 20 bytes
  c.stages[2].name = "s1b";
  // B3 ends at 8.5; Pre1 arrives at 9.5 and Pre2, queued behind it, at 10.5,
  // so Fall2 waits 2 s where a free engine would have made it wait 1 s.
  const SimResult r =
      simulate(c, parse_schedule("Fck0 Off1 Fck1 Off2 Fck2 Rel1 Rel2 Fall3 L B3 Pre1 Pre2 Fall2 B2 Fall1 B1 Fall0 B0"));
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 2);
  EXPECT_DOUBLE_EQ(r.copies.seconds(), 2 + 2 + 1 + 1);
  EXPECT_DOUBLE_EQ(r.time, 29.5 + 2);  // compute alone: 29.5 s
}

TEST(OffloadSimulation, RejectsWhatTheExecutorCouldNotRun) {
  const Chain c = three_stages();
  auto refused = [&](const std::string& text, const std::string& why) { testing::expect_refused(c, text, why); };
  refused("Off0 Fck0 Fall1 Fall2 L B2 B1 Fall0 B0", "x_0 is the batch");
  refused("Fck0 Fall1 Rel1 Fall2 L B2 B1 Fall0 B0", "has no offload in progress");
  refused("Fck0 Fall1 Fall2 Pre1 L B2 B1 Fall0 B0", "is not in host memory");
  refused("Fck0 Fall1 Off1 Fall2 L B2 B1 Fall0 B0", "is being offloaded; release it first");
  refused("Fck0 Fall1 Off1 Rel1 Fall2 L B2 B1 Fall0 B0", "its input is not stored");
  refused("Fck0 Fall1 Off1 Off1 Fall2 L B2 B1 Fall0 B0", "already offloaded");
  Chain no_link = c;
  no_link.device_to_host_bandwidth = 0;
  EXPECT_THROW(simulate(no_link, parse_schedule("Fck0 Fall1 Off1 Fall2 Rel1 L B2 Pre1 B1 Fall0 B0")), Error);
}

// What F_all(0) keeps beyond its output: s_0 - a_1 = 40 - 20 = 20 bytes,
// out in 2 s, back in 1 s.
TEST(SavedOffloadSimulation, MovesWhatTheForwardKeptBeyondItsOutput) {
  const Chain c = three_stages();
  const SimResult plain = simulate(c, parse_schedule("Fall0 Fall1 Fall2 L B2 B1 B0"));
  EXPECT_DOUBLE_EQ(plain.time, 13.5);
  EXPECT_EQ(plain.peak_bytes, 258);  // B2: 228 + delta_2 30

  // OffS0 at t=1 ends at 3, before RelS0 at 4.5; PreS0 at 5.5 arrives at 6.5, long before B0 at 11.5.
  const SimResult r = simulate(c, parse_schedule("Fall0 OffS0 Fall1 Fall2 RelS0 L B2 PreS0 B1 B0"), true);
  EXPECT_DOUBLE_EQ(r.time, 13.5);
  EXPECT_DOUBLE_EQ(r.copies.stall_seconds(), 0);
  EXPECT_EQ(r.copies.to_host_bytes, 20);
  EXPECT_EQ(r.copies.to_device_bytes, 20);
  EXPECT_EQ(r.host_peak_bytes, 20);
  EXPECT_EQ(r.ops[1].after_bytes, 150);  // OffS0 frees nothing yet
  EXPECT_EQ(r.ops[4].after_bytes, 204);  // RelS0 does
  EXPECT_EQ(r.ops[6].peak_bytes, 238);   // B2 without it
  EXPECT_EQ(r.ops[7].after_bytes, 230);  // PreS0 allocates at once
  EXPECT_EQ(r.peak_bytes, 250);          // B1, with it back

  // Prefetched only after B1, the copy back makes B0 wait its 1 s.
  const SimResult late = simulate(c, parse_schedule("Fall0 OffS0 Fall1 Fall2 RelS0 L B2 B1 PreS0 B0"));
  EXPECT_DOUBLE_EQ(late.copies.stall_seconds(), 1);
  EXPECT_DOUBLE_EQ(late.time, 14.5);
  // Released at once, the copy out makes compute wait until t=3.
  const SimResult early = simulate(c, parse_schedule("Fall0 OffS0 RelS0 Fall1 Fall2 L B2 PreS0 B1 B0"));
  EXPECT_DOUBLE_EQ(early.copies.stall_seconds(), 2);
}

TEST(SavedOffloadSimulation, RejectsWhatTheExecutorCouldNotRun) {
  const Chain c = three_stages();
  auto refused = [&](const std::string& text, const std::string& why) { testing::expect_refused(c, text, why); };
  refused("OffS0 Fall0 Fall1 Fall2 L B2 B1 B0", "holds no forward with grad");
  refused("Fall0 RelS0 Fall1 Fall2 L B2 B1 B0", "has no offload in progress");
  refused("Fall0 Fall1 PreS0 Fall2 L B2 B1 B0", "is not in host memory");
  refused("Fall0 OffS0 Fall1 Fall2 L B2 B1 B0", "is being offloaded; release it first");
  refused("Fall0 OffS0 RelS0 Fall1 Fall2 L B2 B1 B0", "is in host memory; prefetch it first");
  refused("Fall0 OffS0 OffS0 Fall1 Fall2 L B2 B1 B0", "already offloaded");
  Chain no_link = c;
  no_link.host_to_device_bandwidth = 0;
  testing::expect_refused(no_link, "Fall0 OffS0 Fall1 Fall2 RelS0 L B2 PreS0 B1 B0", "host-to-device bandwidth");
}

}  // namespace
}  // namespace memtrain::sim
