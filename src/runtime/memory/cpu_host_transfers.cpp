#include "runtime/memory/cpu_host_transfers.h"

#include <chrono>
#include <cstring>
#include <future>

#include <torch/torch.h>

#include "core/seconds_since.h"
#include "runtime/memory/counting_allocator.h"

namespace memtrain::runtime {

namespace {

class CpuHostCopy : public HostCopy {
 public:
  CpuHostCopy(torch::Tensor destination, std::future<Seconds> done, bool to_host) : done_(std::move(done)) {
    destination_ = std::move(destination);
    to_host_ = to_host;
  }
  ~CpuHostCopy() override {
    if (done_.valid()) done_.wait();
  }
  void wait() override {
    if (done_.valid()) seconds_ = done_.get();
  }
  Seconds seconds() const override { return seconds_; }

 private:
  std::future<Seconds> done_;
  Seconds seconds_ = 0;
};

}  // namespace

std::unique_ptr<HostCopy> CpuHostTransfers::copy(const torch::Tensor& source, MemoryPool& into, SerialWorker& engine) {
  // Both tensors are made here, on the calling thread, so the pools are
  // charged in Schedule order; the engine only moves bytes. memcpy, not
  // copy_(): LibTorch's intra-op pool belongs to the training thread.
  torch::Tensor src = source.contiguous();
  torch::Tensor dst;
  {
    PoolScope scope(&into);
    dst = torch::empty_like(src, torch::MemoryFormat::Contiguous);
  }
  auto task = std::make_shared<std::packaged_task<Seconds()>>([src, dst]() mutable {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
    const Seconds seconds = seconds_since(t0);
    // Drop this thread's references before the copy counts as done, so
    // the source is freed when the training thread lets go of it, not later.
    src = torch::Tensor();
    dst = torch::Tensor();
    return seconds;
  });
  std::future<Seconds> done = task->get_future();
  engine.submit([task] { (*task)(); });
  return std::make_unique<CpuHostCopy>(dst, std::move(done), &into == &host_);
}

std::unique_ptr<HostCopy> CpuHostTransfers::to_host(const torch::Tensor& t) { return copy(t, host_, to_host_engine_); }

std::unique_ptr<HostCopy> CpuHostTransfers::to_device(const torch::Tensor& host) {
  return copy(host, device_, to_device_engine_);
}

}  // namespace memtrain::runtime
