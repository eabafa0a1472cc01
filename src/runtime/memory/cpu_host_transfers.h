// HostTransfers on a CPU build: host tensors live in the device memory's
// separately counted host pool, and each direction has its own thread that
// copies, so a copy overlaps the training thread's compute as a DMA engine
// would on a GPU.
#pragma once

#include "runtime/memory/host_transfers.h"
#include "runtime/memory/memory_pool.h"
#include "runtime/memory/serial_worker.h"

namespace memtrain::runtime {

class CpuHostTransfers : public HostTransfers {
 public:
  // Host tensors are charged to `host`; device tensors to `device`.
  CpuHostTransfers(MemoryPool& device, MemoryPool& host) : device_(device), host_(host) {}
  std::unique_ptr<HostCopy> to_host(const torch::Tensor& t) override;
  std::unique_ptr<HostCopy> to_device(const torch::Tensor& host) override;

 private:
  std::unique_ptr<HostCopy> copy(const torch::Tensor& source, MemoryPool& into, SerialWorker& engine);

  MemoryPool& device_;
  MemoryPool& host_;
  SerialWorker to_host_engine_;
  SerialWorker to_device_engine_;
};

}  // namespace memtrain::runtime
