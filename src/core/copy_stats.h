// What a step's copies between device and host memory moved and cost. The
// executor measures it, the Simulator predicts it, the trainer records and
// adds it up, the reports print it: one type with one set of names.
#pragma once

#include <algorithm>

#include "core/units.h"

namespace memtrain {

enum class CopyDirection { Both, ToHost, ToDevice };

struct CopyStats {
  Bytes to_host_bytes = 0;              // device -> host
  Bytes to_device_bytes = 0;            // host -> device
  Bytes weight_bytes = 0;               // of both, weights and gradients (weights in host memory)
  Seconds to_host_seconds = 0;          // the copies' own durations, device -> host
  Seconds to_device_seconds = 0;        // the same, host -> device
  Seconds to_host_stall_seconds = 0;    // compute waiting on copies to host
  Seconds to_device_stall_seconds = 0;  // compute waiting on copies to the device

  Bytes bytes() const { return to_host_bytes + to_device_bytes; }
  Seconds seconds() const { return to_host_seconds + to_device_seconds; }
  Seconds stall_seconds() const { return to_host_stall_seconds + to_device_stall_seconds; }

  // The share of the copies' own time that compute did not wait for:
  // 1 - stall / copy time; 0 when compute waited longer than the copies took,
  // 1 when nothing was copied.
  double hidden_fraction(CopyDirection direction = CopyDirection::Both) const {
    Seconds transfer = seconds(), stall = stall_seconds();
    if (direction == CopyDirection::ToHost) transfer = to_host_seconds, stall = to_host_stall_seconds;
    if (direction == CopyDirection::ToDevice) transfer = to_device_seconds, stall = to_device_stall_seconds;
    return transfer > 0 ? std::max(0.0, 1.0 - stall / transfer) : 1.0;
  }

  CopyStats& operator+=(const CopyStats& other) {
    to_host_bytes += other.to_host_bytes;
    to_device_bytes += other.to_device_bytes;
    weight_bytes += other.weight_bytes;
    to_host_seconds += other.to_host_seconds;
    to_device_seconds += other.to_device_seconds;
    to_host_stall_seconds += other.to_host_stall_seconds;
    to_device_stall_seconds += other.to_device_stall_seconds;
    return *this;
  }
};

}  // namespace memtrain
