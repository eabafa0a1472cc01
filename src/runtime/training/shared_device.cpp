#include "runtime/training/shared_device.h"

#include "core/error.h"

namespace memtrain::runtime {

SharedDevice::SharedDevice(const std::string& name, DeviceMemory& memory, const std::string& label, Seconds timeout) {
  auto* cpu = dynamic_cast<CpuDeviceMemory*>(&memory);
  if (!cpu) {
    throw UsageError("jobs share a budget on the counted CPU device; device " + memory.device().str() +
                     " is not supported for sharing yet; expected cpu");
  }
  pool_ = &cpu->pool();
  if (pool_->shared()) {
    throw UsageError("this process's " + memory.device().str() +
                     " memory is shared with a job group already; a "
                     "process joins one group once");
  }
  group_ = jobs::JobGroup::join(name, memory.device().str(), label, timeout);
  if (!pool_->share(this)) {
    const Bytes held = pool_->live();
    group_.reset();
    throw Error("job group " + name + "'s budget cannot hold the " + format_bytes(held) +
                " this process holds already");
  }
}

SharedDevice::~SharedDevice() { pool_->share(nullptr); }

void SharedDevice::check_planner(const std::string& planner) const {
  if (policy() == jobs::Policy::Tensile && planner != "tensile") {
    throw UsageError("job group " + group_->name() +
                     " shares its budget by the tensile policy, whose jobs plan with the tensile planner; got "
                     "planner " +
                     planner);
  }
}

Bytes SharedDevice::acquire(const StepLeaseRequest& request, Seconds* waited) {
  jobs::LeaseRequest r;
  r.want = request.want;
  r.least = request.least;
  for (const auto& [bytes, seconds] : request.curve) r.curve.push_back({bytes, seconds});
  return group_->acquire(r, waited);
}

}  // namespace memtrain::runtime
