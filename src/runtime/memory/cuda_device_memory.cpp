// DeviceMemory on a CUDA build: live and peak bytes come from the CUDA
// caching allocator's statistics (bytes allocated to tensors, not bytes
// reserved by its cache), and the budget caps the allocator with a
// per-process memory fraction. The cap is on what the allocator reserves,
// so bytes reserved but free (a block split for a smaller tensor) could
// make a step that fits the budget run out: unless the process configured
// its allocator (PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF), memtrain
// turns on expandable segments, which grow one segment in pages instead of
// keeping blocks of the sizes first asked for. Compiled only against a CUDA LibTorch
// (MEMTRAIN_WITH_CUDA); a CUDA out-of-memory error inside a step is
// rethrown as OutOfBudget by is_out_of_budget(), so the trainer retries it
// exactly as on CPU.
#ifdef MEMTRAIN_WITH_CUDA

#include <cstdlib>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PinnedMemoryAllocator.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

#include "core/error.h"
#include "runtime/memory/device_memory.h"

namespace memtrain::runtime {

namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

// Expandable segments, once per process, where the process chose nothing.
void prefer_expandable_segments() {
  static const bool once = [] {
    if (std::getenv("PYTORCH_CUDA_ALLOC_CONF") == nullptr && std::getenv("PYTORCH_ALLOC_CONF") == nullptr) {
      c10::CachingAllocator::setAllocatorSettings("expandable_segments:True");
    }
    return true;
  }();
  (void)once;
}

}  // namespace

std::unique_ptr<HostTransfers> make_cuda_host_transfers(int index);  // cuda_host_transfers.cpp

namespace {

class CudaScope : public DeviceScope {
 public:
  explicit CudaScope(int index) : guard_(static_cast<c10::DeviceIndex>(index)) {}

 private:
  c10::cuda::CUDAGuard guard_;
};

class CudaDeviceMemory : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int index) : index_(index) {
    if (index < 0 || index >= static_cast<int>(c10::cuda::device_count())) {
      throw UsageError("device cuda:" + std::to_string(index) + ": this machine has " +
                       std::to_string(c10::cuda::device_count()) + " CUDA devices");
    }
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
    total_ = static_cast<Bytes>(p->totalGlobalMem);
    name_ = p->name;
    // Weights, Adam state and offloaded tensors in host memory are pinned:
    // copies of pageable memory run at a fraction of the link's speed and
    // hold up the thread that issues them.
    host().allocate_from(at::cuda::getPinnedMemoryAllocator());
    prefer_expandable_segments();
  }
  torch::Device device() const override { return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index_)); }
  std::string describe() const override {
    return "cuda:" + std::to_string(index_) + " " + name_ + " (" + format_bytes(total_) + ")";
  }
  // Index 0 is StatType::AGGREGATE (all pools); the Stat type itself moved
  // namespace between LibTorch 1.x and 2.x, hence auto (defined before use).
  auto allocated() const { return alloc::getDeviceStats(index_).allocated_bytes[0]; }
  Bytes live() const override { return allocated().current; }
  Bytes peak() const override { return allocated().peak; }
  Bytes reserved_peak() const override { return alloc::getDeviceStats(index_).reserved_bytes[0].peak; }
  void set_budget(Bytes budget) override {
    budget_ = budget;
    apply();
  }
  Bytes budget() const override { return budget_; }
  bool enforced() const override { return enforced_; }
  // An event on the compute stream, timed by the device.
  class EventMark : public TimeMark {
   public:
    at::cuda::CUDAEvent event{cudaEventDefault};
  };
  std::unique_ptr<TimeMark> mark_time() override {
    auto mark = std::make_unique<EventMark>();
    mark->event.record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index_)));
    return mark;
  }
  Seconds seconds_between(const TimeMark& from, const TimeMark& to) const override {
    const auto& a = dynamic_cast<const EventMark&>(from);
    const auto& b = dynamic_cast<const EventMark&>(to);
    return a.event.elapsed_time(b.event) / 1000.0;
  }
  std::unique_ptr<HostTransfers> make_transfers() override { return make_cuda_host_transfers(index_); }
  std::unique_ptr<DeviceScope> activate() override { return std::make_unique<CudaScope>(index_); }
  at::Generator make_generator(uint64_t seed) const override {
    at::Generator g = at::cuda::detail::createCUDAGenerator(static_cast<c10::DeviceIndex>(index_));
    g.set_current_seed(seed);
    return g;
  }
  bool is_out_of_budget(const std::exception& e) const override {
    return enforced_ && std::string(e.what()).find("out of memory") != std::string::npos;
  }

 protected:
  void set_enforced(bool on) override {
    enforced_ = on;
    apply();
  }
  // The caching allocator's statistics are the process's too (what
  // torch.cuda.max_memory_allocated reads): DeviceMemory keeps the peaks
  // this resets.
  ClearedPeaks restart_peak() override {
    const auto stats = alloc::getDeviceStats(index_);
    alloc::resetPeakStats(index_);
    return {stats.allocated_bytes[0].peak, stats.reserved_bytes[0].peak};
  }
  // The compute stream only: copies on the side streams keep running.
  void wait_for_compute() override {
    c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index_)).synchronize();
  }

 private:
  // The cap is on what the allocator may reserve, so fragmentation in its
  // cache counts against the budget too; stricter than CPU accounting.
  void apply() {
    const double fraction = enforced_ && budget_ > 0 ? std::min(1.0, static_cast<double>(budget_) / total_) : 1.0;
    alloc::setMemoryFraction(fraction, index_);
  }

  int index_;
  Bytes total_ = 0;
  std::string name_;
  Bytes budget_ = -1;
  bool enforced_ = false;
};

}  // namespace

std::unique_ptr<DeviceMemory> make_cuda_device_memory(int index) { return std::make_unique<CudaDeviceMemory>(index); }

}  // namespace memtrain::runtime

#endif  // MEMTRAIN_WITH_CUDA
