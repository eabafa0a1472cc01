#include "runtime/memory/device_memory.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>

#include "core/error.h"
#include "runtime/memory/counting_allocator.h"
#include "runtime/memory/cpu_host_transfers.h"

namespace memtrain::runtime {

#ifdef MEMTRAIN_WITH_CUDA
std::unique_ptr<DeviceMemory> make_cuda_device_memory(int index);  // cuda_device_memory.cpp
#endif

namespace {

class HostClockMark : public DeviceMemory::TimeMark {
 public:
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

class PooledScope : public DeviceScope {
 public:
  explicit PooledScope(MemoryPool* pool) : scope_(pool) {}

 private:
  PoolScope scope_;
};

}  // namespace

std::unique_ptr<DeviceMemory::TimeMark> DeviceMemory::mark_time() { return std::make_unique<HostClockMark>(); }

Seconds DeviceMemory::seconds_between(const TimeMark& from, const TimeMark& to) const {
  const auto& a = dynamic_cast<const HostClockMark&>(from);
  const auto& b = dynamic_cast<const HostClockMark&>(to);
  return std::chrono::duration<double>(b.at - a.at).count();
}

at::Generator DeviceMemory::make_generator(uint64_t seed) const {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

CpuDeviceMemory::CpuDeviceMemory() { install_counting_allocator(); }

std::unique_ptr<DeviceScope> CpuDeviceMemory::activate() { return std::make_unique<PooledScope>(&pool_); }

bool CpuDeviceMemory::counts_this_thread() { return charges_on_this_thread(pool_); }

std::unique_ptr<HostTransfers> CpuDeviceMemory::make_transfers() {
  return std::make_unique<CpuHostTransfers>(pool_, host());
}

std::unique_ptr<DeviceMemory> make_device_memory(const std::string& device) {
  if (device == "cpu") return std::make_unique<CpuDeviceMemory>();
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
#ifdef MEMTRAIN_WITH_CUDA
    const int index = device == "cuda" ? 0 : std::stoi(device.substr(5));
    return make_cuda_device_memory(index);
#else
    throw UsageError("device " + device + ": this memtrain was built without CUDA; expected cpu");
#endif
  }
  throw UsageError("device '" + device + "' is not known; expected cpu or cuda[:N]");
}

}  // namespace memtrain::runtime
