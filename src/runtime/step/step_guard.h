// What a step of any front end holds while it runs: its budget, enforced,
// and the point an attempt that ran out of budget rolls back to (its
// StepRollback: the random generators, the model's buffers and the
// gradients as the step found them). The one place a device's budget is set.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/units.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/enforcement_scope.h"
#include "runtime/step/step_rollback.h"

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
  // `model`'s buffers (when given). How the gradients go back is the front
  // end's to say: rollback().discard_gradients_with() or keep_gradients().
  StepGuard(DeviceMemory& memory, std::optional<Bytes> budget, bool enforce, const at::Generator& generator,
            StagedModel* model = nullptr);
  // The random generators, the buffers and the gradients as the step found them.
  void roll_back() const { rollback_.roll_back(); }
  StepRollback& rollback() { return rollback_; }
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
  StepRollback rollback_;
  std::unique_ptr<EnforcementScope> enforcement_;
};

}  // namespace memtrain::runtime
