#include "cli/shared_device.h"

#include "core/error.h"

namespace memtrain::cli {

SharedDevice::SharedDevice(const std::string& name, runtime::DeviceMemory& memory, const std::string& device,
                           const std::string& label, Seconds timeout) {
  auto* cpu = dynamic_cast<runtime::CpuDeviceMemory*>(&memory);
  if (!cpu) {
    throw UsageError("--share: jobs share a budget on the counted CPU device; device " + device +
                     " is not supported for sharing yet; expected --device cpu");
  }
  pool_ = &cpu->pool();
  // Bytes charged before would be refunded to the group without having been charged.
  if (pool_->live() != 0) throw Error("--share: the device pool already holds " + format_bytes(pool_->live()));
  try {
    group_ = jobs::JobGroup::join(name, device, label, timeout);
  } catch (const UsageError& e) {
    throw UsageError("--share " + name + ": " + e.what() + "; start it with memtrain jobs --name " + name);
  }
  pool_->share(this);
}

SharedDevice::~SharedDevice() { pool_->share(nullptr); }

Bytes SharedDevice::acquire(const runtime::StepLeaseRequest& request, Seconds* waited) {
  jobs::LeaseRequest r;
  r.want = request.want;
  r.least = request.least;
  for (const auto& [bytes, seconds] : request.curve) r.curve.push_back({bytes, seconds});
  return group_->acquire(r, waited);
}

}  // namespace memtrain::cli
