#include "runtime/step/step_guard.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

namespace memtrain::runtime {

void refuse_update_without_room(DeviceMemory& memory, Bytes budget, Bytes temporary, const std::string& where) {
  // The allocator's counts are current without waiting for the device.
  const Bytes live = memory.live();
  if (memory.enforced() && live + temporary > budget) {
    throw Error(where + ": budget " + format_bytes(budget) + " leaves no room for the optimizer update (" +
                format_bytes(temporary) + " on top of " + format_bytes(live) + ")");
  }
}

at::Generator default_generator_of(const torch::Device& device) {
  return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
}

StepGuard::StepGuard(DeviceMemory& memory, std::optional<Bytes> budget, bool enforce, const at::Generator& generator,
                     StagedModel* model)
    : memory_(memory), enforce_(enforce), rollback_(generator, model, memory) {
  if (budget) memory_.set_budget(*budget);
  enforce_again();
}

void StepGuard::enforce_again() {
  enforcement_.reset();
  enforcement_ = std::make_unique<EnforcementScope>(memory_, enforce_, /*after=*/false);
}

}  // namespace memtrain::runtime
