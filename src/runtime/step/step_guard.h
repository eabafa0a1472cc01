// What a step of any front end holds while it runs: its budget, enforced,
// and the point an attempt that ran out of budget rolls back to (the random
// generators and the model's buffers as the step found them). The one place
// a device's budget is set.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/units.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/enforcement_scope.h"
#include "runtime/model/buffer_snapshot.h"
#include "runtime/model/rng_snapshot.h"

namespace memtrain::runtime {

// Throws Error when an optimizer update needing `temporary` bytes on top of
// what `memory` holds now would pass the enforced `budget`: an update runs
// whole or not at all. `where` names the step.
void refuse_update_without_room(DeviceMemory& memory, Bytes budget, Bytes temporary, const std::string& where);

// LibTorch's default generator of `device`: what a model's dropout draws from.
at::Generator default_generator_of(const torch::Device& device);

// What a step of any trainer holds while it runs: the budget enforced, and
// the point a failed attempt rolls back to. The one place a device's budget
// is set: every front end's step sets it through its guard.
class StepGuard {
 public:
  // Sets `memory`'s budget to `budget` (when given) and enforces it while
  // the guard lives (when `enforce`), leaving the device unenforced after
  // it; captures `generator` (with LibTorch's default CPU generator) and
  // `model`'s buffers (when given).
  StepGuard(DeviceMemory& memory, std::optional<Bytes> budget, bool enforce, const at::Generator& generator,
            StagedModel* model = nullptr);
  // The random generators and the buffers as the step found them.
  void roll_back() const;
  // The step has ended: the budget is no longer enforced. roll_back()
  // still works (a second backward of the step runs it again).
  void release() { enforcement_.reset(); }
  // Enforced again, for a step run again after release().
  void enforce_again();
  // The running step's budget is `budget` from now on (an N% budget whose
  // reference grew while the step ran).
  void set_budget(Bytes budget) { memory_.set_budget(budget); }

 private:
  DeviceMemory& memory_;
  bool enforce_;
  at::Generator generator_;
  RngSnapshot rng_;
  std::optional<BufferSnapshot> buffers_;
  std::unique_ptr<EnforcementScope> enforcement_;
};

}  // namespace memtrain::runtime
