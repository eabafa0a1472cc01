// The device times of a run's operations, measured without waiting for the
// device: start() and stop() around each operation leave marks in the
// device's queue (DeviceMemory::mark_time), and settle() waits once and
// reads the times of the operations stopped since it last did. Both
// executors, the chain's and the graph's, time their operations with it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/units.h"
#include "runtime/memory/device_memory.h"

namespace memtrain::runtime {

class OperationTimes {
 public:
  explicit OperationTimes(DeviceMemory& memory) : memory_(memory) {}

  void start() { start_ = memory_.mark_time(); }
  void stop() { marks_.emplace_back(std::move(start_), memory_.mark_time()); }
  // One synchronize(), then each operation's seconds, in the order they stopped.
  std::vector<Seconds> settle() {
    memory_.synchronize();
    std::vector<Seconds> seconds;
    seconds.reserve(marks_.size());
    for (const auto& [from, to] : marks_) seconds.push_back(memory_.seconds_between(*from, *to));
    marks_.clear();
    return seconds;
  }

 private:
  DeviceMemory& memory_;
  std::unique_ptr<DeviceMemory::TimeMark> start_;
  std::vector<std::pair<std::unique_ptr<DeviceMemory::TimeMark>, std::unique_ptr<DeviceMemory::TimeMark>>> marks_;
};

}  // namespace memtrain::runtime
