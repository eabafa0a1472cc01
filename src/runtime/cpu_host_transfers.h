// HostTransfers on a CPU build: host tensors live in the device memory's
// separately counted host pool, and each direction has its own thread that
// copies, so a copy overlaps the training thread's compute as a DMA engine
// would on a GPU.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/host_transfers.h"
#include "runtime/memory_pool.h"

namespace memtrain::runtime {

// One worker thread running queued jobs in order.
class CopyEngine {
 public:
  CopyEngine();
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  void submit(std::function<void()> job);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread worker_;
};

class CpuHostTransfers : public HostTransfers {
 public:
  // Host tensors are charged to `host`; device tensors to `device`.
  CpuHostTransfers(MemoryPool& device, MemoryPool& host) : device_(device), host_(host) {}
  std::unique_ptr<HostCopy> to_host(const torch::Tensor& t) override;
  std::unique_ptr<HostCopy> to_device(const torch::Tensor& host) override;

 private:
  std::unique_ptr<HostCopy> copy(const torch::Tensor& source, MemoryPool& into, CopyEngine& engine);

  MemoryPool& device_;
  MemoryPool& host_;
  CopyEngine to_host_engine_;
  CopyEngine to_device_engine_;
};

}  // namespace memtrain::runtime
