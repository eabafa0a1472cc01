// The process's peak outlives the resets that measure each operation: a
// front end reports it as the device's own statistics would have.
#include "runtime/memory/device_memory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

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
