// Measures the host link the Simulator's copy engines stand for: how fast a
// tensor moves device -> host and host -> device through this device's
// HostTransfers (on CPU, a memcpy between the two counted pools; on CUDA, a
// pinned copy on a side stream).
#pragma once

#include "runtime/memory/device_memory.h"

namespace memtrain::runtime {

struct LinkRates {
  double device_to_host = 0;  // bytes/s, median over the repeats
  double host_to_device = 0;  // bytes/s
  Bytes bytes = 0;            // per copy
  int repeats = 0;
};

// What `calibrate` and `train` measure by default.
constexpr Bytes kDefaultLinkCopyBytes = Bytes(64) << 20;
constexpr int kDefaultLinkRepeats = 5;

// Copies a `bytes`-byte tensor each way `repeats` times (after one warm-up).
LinkRates measure_link(DeviceMemory& memory, Bytes bytes, int repeats);

}  // namespace memtrain::runtime
