// Whether a device's budget is enforced, switched for a scope: when the
// scope ends, whatever ended it, the device's enforcement is as it was (or
// as the scope was told to leave it). The one
// way memtrain switches enforcement: a step of any trainer (its StepGuard,
// runtime/step/step_guard.h), and dropping a failed attempt's queued
// work outside the budget (the executor).
#pragma once

#include <optional>

#include "runtime/memory/device_memory.h"

namespace memtrain::runtime {

class EnforcementScope {
 public:
  // `after`: what the device is left with when the scope ends, where that
  // is not what it found: a step of the blocks leaves the process
  // unbudgeted, even when another model's step, begun and never finished,
  // had switched enforcement on.
  EnforcementScope(DeviceMemory& memory, bool enforced, std::optional<bool> after = std::nullopt)
      : memory_(memory), after_(after.value_or(memory.enforced())) {
    memory_.set_enforced(enforced);
  }
  ~EnforcementScope() { memory_.set_enforced(after_); }
  EnforcementScope(const EnforcementScope&) = delete;
  EnforcementScope& operator=(const EnforcementScope&) = delete;

 private:
  DeviceMemory& memory_;
  bool after_;
};

}  // namespace memtrain::runtime
