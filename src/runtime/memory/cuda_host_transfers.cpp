// HostTransfers on a CUDA build: host tensors are pinned, each direction
// copies on its own side stream, and a copy starts after everything compute
// has queued so far (an event), so it never waits for later compute and
// compute never waits for it until the Schedule says so.
#ifdef MEMTRAIN_WITH_CUDA

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include "runtime/memory/host_transfers.h"

namespace memtrain::runtime {

namespace {

class CudaHostCopy : public HostCopy {
 public:
  CudaHostCopy(torch::Tensor source, torch::Tensor destination, bool to_host) : source_(std::move(source)) {
    destination_ = std::move(destination);
    to_host_ = to_host;
  }
  ~CudaHostCopy() override {
    if (!done_) end_.synchronize();
  }
  void wait() override {
    if (done_) return;
    end_.synchronize();
    seconds_ = start_.elapsed_time(end_) / 1000.0;
    source_ = torch::Tensor();
    done_ = true;
  }
  Seconds seconds() const override { return seconds_; }

  at::cuda::CUDAEvent start_{cudaEventDefault};  // timing enabled
  at::cuda::CUDAEvent end_{cudaEventDefault};

 private:
  torch::Tensor source_;  // kept until the copy has ended
  Seconds seconds_ = 0;
  bool done_ = false;
};

class CudaHostTransfers : public HostTransfers {
 public:
  explicit CudaHostTransfers(int index)
      : index_(static_cast<c10::DeviceIndex>(index)), to_host_stream_(c10::cuda::getStreamFromPool(false, index_)),
        to_device_stream_(c10::cuda::getStreamFromPool(false, index_)) {}

  std::unique_ptr<HostCopy> to_host(const torch::Tensor& t) override {
    const torch::Tensor src = t.contiguous();
    torch::Tensor dst = torch::empty(src.sizes(), src.options().device(torch::kCPU).pinned_memory(true));
    return issue(src, dst, src, to_host_stream_, /*to_host=*/true);
  }
  std::unique_ptr<HostCopy> to_device(const torch::Tensor& host) override {
    torch::Tensor dst = torch::empty(host.sizes(), host.options().device(torch::Device(torch::kCUDA, index_)));
    return issue(host, dst, dst, to_device_stream_, /*to_host=*/false);
  }

 private:
  std::unique_ptr<HostCopy> issue(const torch::Tensor& src, const torch::Tensor& dst, const torch::Tensor& on_device,
                                  const c10::cuda::CUDAStream& side, bool to_host) {
    auto copy = std::make_unique<CudaHostCopy>(src, dst, to_host);
    at::cuda::CUDAEvent queued;
    queued.record(c10::cuda::getCurrentCUDAStream(index_));
    queued.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      copy->start_.record(side);
      copy->destination().copy_(src, /*non_blocking=*/true);
      copy->end_.record(side);
    }
    // The device block is used on the side stream too: the caching
    // allocator must not hand it out again before that use has ended.
    c10::cuda::CUDACachingAllocator::recordStream(on_device.storage().data_ptr(), side);
    return copy;
  }

  c10::DeviceIndex index_;
  c10::cuda::CUDAStream to_host_stream_;
  c10::cuda::CUDAStream to_device_stream_;
};

}  // namespace

std::unique_ptr<HostTransfers> make_cuda_host_transfers(int index) {
  return std::make_unique<CudaHostTransfers>(index);
}

}  // namespace memtrain::runtime

#endif  // MEMTRAIN_WITH_CUDA
