// The process's peak outlives the resets that measure each operation: a
// front end reports it as the device's own statistics would have. A scope
// switches the budget's enforcement and restores what it found.
#include "runtime/memory/device_memory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "runtime/memory/enforcement_scope.h"

namespace memtrain::runtime {
namespace {

TEST(DeviceMemory, TheProcessPeakKeepsThePeaksThatResetsCleared) {
  CpuDeviceMemory memory;
  auto counted = memory.activate();
  memory.reset_process_peak();
  const Bytes base = memory.live();
  { torch::Tensor big = torch::empty({4 << 20}, torch::kUInt8); }
  memory.reset_peak();  // as the executor does before an operation
  EXPECT_EQ(memory.peak(), base);
  torch::Tensor small = torch::empty({1 << 20}, torch::kUInt8);
  EXPECT_EQ(memory.peak(), base + (1 << 20));
  EXPECT_EQ(memory.process_peak(), base + (4 << 20));
  EXPECT_EQ(memory.process_reserved_peak(), base + (4 << 20));  // counted bytes on the CPU
  memory.reset_process_peak();
  EXPECT_EQ(memory.process_peak(), base + (1 << 20));
}

}  // namespace
}  // namespace memtrain::runtime

namespace memtrain::runtime {
namespace {

TEST(EnforcementScope, SwitchesForItsScopeAndRestoresWhatItFound) {
  CpuDeviceMemory memory;
  auto counted = memory.activate();
  memory.set_budget(1 << 20);
  {
    EnforcementScope step(memory, true);
    EXPECT_TRUE(memory.enforced());
    EXPECT_THROW(torch::empty({2 << 20}, torch::kUInt8), OutOfBudget);
    {
      EnforcementScope outside(memory, false);
      EXPECT_FALSE(memory.enforced());
      torch::Tensor big = torch::empty({2 << 20}, torch::kUInt8);  // allowed here
    }
    EXPECT_TRUE(memory.enforced());
  }
  EXPECT_FALSE(memory.enforced());
  // A scope told what to leave behind leaves it, whatever it found.
  {
    EnforcementScope outer(memory, true);
    { EnforcementScope step(memory, true, /*after=*/false); }
    EXPECT_FALSE(memory.enforced());
  }
  memory.set_budget(-1);
}

}  // namespace
}  // namespace memtrain::runtime
