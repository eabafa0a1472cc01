// CopyStats: totals from the two directions, and the hidden share of copy
// time that the executor, the Simulator and the reports all print.
#include "core/copy_stats.h"

#include <gtest/gtest.h>

namespace memtrain {
namespace {

TEST(CopyStats, TotalsAreTheTwoDirectionsTogether) {
  CopyStats c;
  c.to_host_bytes = 30;
  c.to_device_bytes = 12;
  c.to_host_seconds = 0.3;
  c.to_device_seconds = 0.1;
  c.to_host_stall_seconds = 0.1;
  EXPECT_EQ(c.bytes(), 42);
  EXPECT_DOUBLE_EQ(c.seconds(), 0.4);
  EXPECT_DOUBLE_EQ(c.stall_seconds(), 0.1);
}

TEST(CopyStats, HiddenIsTheShareOfCopyTimeComputeDidNotWaitFor) {
  CopyStats c;
  EXPECT_EQ(c.hidden_fraction(), 1) << "nothing moved";
  c.to_host_seconds = 0.3;
  c.to_host_stall_seconds = 0.1;
  c.to_device_seconds = 0.2;
  EXPECT_NEAR(c.hidden_fraction(), 1 - 0.1 / 0.5, 1e-12);
  EXPECT_NEAR(c.hidden_fraction(CopyDirection::ToHost), 1 - 0.1 / 0.3, 1e-12);
  EXPECT_EQ(c.hidden_fraction(CopyDirection::ToDevice), 1) << "compute never waited for a copy in";
  c.to_device_stall_seconds = 0.5;
  EXPECT_EQ(c.hidden_fraction(CopyDirection::ToDevice), 0) << "waits beyond the copies' time hide nothing, not less";
}

TEST(CopyStats, AddsUpFieldByField) {
  CopyStats a, b;
  a.to_host_bytes = 1, a.to_device_bytes = 2, a.weight_bytes = 3;
  a.to_host_seconds = 1, a.to_device_seconds = 2, a.to_host_stall_seconds = 3, a.to_device_stall_seconds = 4;
  b = a;
  b += a;
  EXPECT_EQ(b.to_host_bytes, 2);
  EXPECT_EQ(b.to_device_bytes, 4);
  EXPECT_EQ(b.weight_bytes, 6);
  EXPECT_EQ(b.to_host_seconds, 2);
  EXPECT_EQ(b.to_device_seconds, 4);
  EXPECT_EQ(b.to_host_stall_seconds, 6);
  EXPECT_EQ(b.to_device_stall_seconds, 8);
}

}  // namespace
}  // namespace memtrain
