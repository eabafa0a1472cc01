// The device memory a training step runs in, behind one interface:
// - on CPU, the "device" is a MemoryPool counted exactly by memtrain's
//   allocator, and "host" a second pool (for offload, later);
// - on a CUDA build, the CUDA caching allocator's statistics, capped by a
//   per-process memory fraction (cuda_device_memory.cpp).
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "runtime/memory/counting_allocator.h"
#include "runtime/memory/host_transfers.h"
#include "runtime/memory/memory_pool.h"
#include "runtime/memory/memory_relief.h"

namespace memtrain::runtime {

// Keeps a device's allocation routing active on this thread while it lives.
class DeviceScope {
 public:
  virtual ~DeviceScope() = default;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  virtual torch::Device device() const = 0;
  virtual std::string describe() const = 0;  // "cpu (counted)", "cuda:0 NVIDIA H100 ..."
  virtual Bytes live() const = 0;            // bytes of tensors alive now
  virtual Bytes peak() const = 0;            // highest live since the last reset
  // On CUDA, the caching allocator's bytes reserved from the device: at
  // least what is live.
  virtual Bytes reserved_peak() const { return peak(); }
  // memtrain measures an operation's peak by resetting the device's; the
  // peaks it resets are kept, so that the process's peak stays known.
  void reset_peak() {
    const ClearedPeaks cleared = restart_peak();
    process_peak_ = std::max(process_peak_, cleared.live);
    process_reserved_peak_ = std::max(process_reserved_peak_, cleared.reserved);
  }
  // The highest live (reserved) since the last reset_process_peak(), the
  // resets of reset_peak() included: what the device's own statistics would
  // say had memtrain never reset them.
  Bytes process_peak() const { return std::max(process_peak_, peak()); }
  Bytes process_reserved_peak() const { return std::max(process_reserved_peak_, reserved_peak()); }
  void reset_process_peak() {
    process_peak_ = process_reserved_peak_ = 0;
    restart_peak();
  }
  // The most an allocation refused for the budget since the last reset
  // would have made live (0: none, or not known on this device).
  virtual Bytes refused() const { return 0; }
  // Allocations this device's budget refused so far (0 where its allocator
  // raises its own error instead: CUDA's out-of-memory).
  virtual long refusals() const { return 0; }
  // budget < 0: none. While enforced, exceeding it throws OutOfBudget;
  // an EnforcementScope switches enforcement.
  virtual void set_budget(Bytes budget) = 0;
  virtual Bytes budget() const = 0;
  virtual bool enforced() const = 0;
  // Before refusing an allocation for the enforced budget, asks `relief`
  // to make room (nullptr: none). False where the device's allocator cannot
  // ask (CUDA's caching allocator raises its own error): there the caller
  // makes room before it is needed.
  virtual bool relieve_with(MemoryRelief*) { return false; }
  // Waits for queued compute (not for copies to or from host), so
  // wall-clock timings mean something; counted, so that a test can hold a
  // step to the one it may have (at its end).
  void synchronize() {
    ++synchronizations_;
    wait_for_compute();
  }
  long synchronizations() const { return synchronizations_; }
  // A point in the queued compute, when the work queued before it ends:
  // what an operation's time is measured between without waiting for the
  // device. seconds_between() is the time from `from` to `to`, once the
  // device has reached `to` (after synchronize()). On the CPU, compute runs
  // as it is queued: a mark is the host's clock.
  class TimeMark {
   public:
    virtual ~TimeMark() = default;
  };
  virtual std::unique_ptr<TimeMark> mark_time();
  virtual Seconds seconds_between(const TimeMark& from, const TimeMark& to) const;
  // True for an error that means this device's budget was hit though it was
  // not thrown as OutOfBudget (CUDA's own out-of-memory error).
  virtual bool is_out_of_budget(const std::exception&) const { return false; }

  // While the returned guard lives, this thread's tensor allocations are
  // charged to this device.
  virtual std::unique_ptr<DeviceScope> activate() = 0;
  // Whether this thread's tensor allocations are charged to this device
  // (CUDA's allocator charges every thread's).
  virtual bool counts_this_thread() { return true; }
  // A random generator on this device, seeded with `seed`: dropout masks
  // are drawn where the activations live.
  virtual at::Generator make_generator(uint64_t seed) const;
  // Copy engines between this device and host memory (Offload, Prefetch).
  virtual std::unique_ptr<HostTransfers> make_transfers() = 0;
  // True when the device's compute runs on the host's CPU cores (the CPU
  // build): work on the host then competes with it rather than overlapping.
  virtual bool computes_on_host_cores() const { return false; }
  // The separately counted host pool; PoolScope(&host()) selects it.
  MemoryPool& host() { return host_; }

 protected:
  friend class EnforcementScope;
  virtual void set_enforced(bool on) = 0;
  virtual void wait_for_compute() {}
  // Starts the device's peak again from what is live now, and says the
  // peaks it cleared (read with the reset: one look at the device's counts).
  struct ClearedPeaks {
    Bytes live = 0, reserved = 0;
  };
  virtual ClearedPeaks restart_peak() = 0;

 private:
  MemoryPool host_{"host"};
  long synchronizations_ = 0;
  Bytes process_peak_ = 0, process_reserved_peak_ = 0;
};

class CpuDeviceMemory : public DeviceMemory {
 public:
  CpuDeviceMemory();
  torch::Device device() const override { return torch::kCPU; }
  std::string describe() const override { return "cpu (tensor memory counted by memtrain's allocator)"; }
  Bytes live() const override { return pool_.live(); }
  Bytes peak() const override { return pool_.peak(); }
  Bytes refused() const override { return pool_.refused(); }
  long refusals() const override { return pool_.refusals(); }
  void set_budget(Bytes budget) override { pool_.set_budget(budget); }
  Bytes budget() const override { return pool_.budget(); }
  bool enforced() const override { return pool_.enforced(); }
  bool relieve_with(MemoryRelief* relief) override {
    pool_.relieve_with(relief);
    return true;
  }
  std::unique_ptr<DeviceScope> activate() override;
  bool counts_this_thread() override;
  std::unique_ptr<HostTransfers> make_transfers() override;
  bool computes_on_host_cores() const override { return true; }

  MemoryPool& pool() { return pool_; }

 protected:
  void set_enforced(bool on) override { pool_.set_enforced(on); }
  ClearedPeaks restart_peak() override {
    const Bytes cleared = pool_.peak();
    pool_.reset_peak();
    return {cleared, cleared};
  }

 private:
  MemoryPool pool_{"device"};
};

// "cpu", or "cuda" / "cuda:N" on a CUDA build; UsageError otherwise.
std::unique_ptr<DeviceMemory> make_device_memory(const std::string& device);

}  // namespace memtrain::runtime
