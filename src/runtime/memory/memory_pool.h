// A separately counted pool of tensor memory ("device" or "host") with a
// live count, a peak that can be reset per step, and an optional budget. The
// counting allocator charges each allocation to the pool selected on the
// allocating thread (PoolScope); a free is charged back to the same pool,
// on whatever thread it happens.
#pragma once

#include <atomic>
#include <string>

#include "core/units.h"

namespace c10 {
struct Allocator;
}

namespace memtrain::runtime {

class MemoryRelief;
class SharedAccount;

// Shared between a MemoryPool and its live allocations, so that a tensor
// that outlives its pool can still be freed safely.
struct PoolCounters {
  std::string name;
  std::atomic<Bytes> live{0};         // bytes allocated and not yet freed
  std::atomic<Bytes> peak{0};         // highest `live` since the last reset
  std::atomic<Bytes> refused{0};      // highest `live` + request refused since the last reset (0: none)
  std::atomic<Bytes> budget{-1};      // -1: no budget
  std::atomic<bool> enforced{false};  // throw OutOfBudget when over budget
  std::atomic<long> allocations{0};   // count of allocations ever made
  std::atomic<long> refusals{0};      // count of allocations ever refused
  std::atomic<long> refs{1};          // the pool itself + one per live allocation
  // Where the pool's blocks come from; nullptr: LibTorch's default CPU
  // allocator. A CUDA build's host pool takes pinned memory, so copies to and
  // from it run asynchronously at the link's full speed.
  std::atomic<c10::Allocator*> source{nullptr};
  // Also charged with every allocation, when set (MemoryPool::share).
  std::atomic<SharedAccount*> account{nullptr};
  // What was live when the account was set, charged to it in one sum: the
  // blocks allocated before refund it as they are freed, until it is spent.
  std::atomic<Bytes> carried{0};
  // Asked to free memory before an enforced budget refuses (MemoryPool::relieve_with).
  std::atomic<MemoryRelief*> relief{nullptr};

  // Charges `bytes`; throws OutOfBudget (charging nothing) when enforced and
  // over budget after the relief, if any, freed what it could, or when the
  // shared account refuses. Returns whether the shared account was charged,
  // to pass to refund().
  bool charge(Bytes bytes);
  void refund(Bytes bytes, bool shared);
  void release();  // drops one reference; deletes this at zero
};

class MemoryPool {
 public:
  explicit MemoryPool(std::string name);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  const std::string& name() const { return counters_->name; }
  Bytes live() const { return counters_->live.load(); }
  Bytes peak() const { return counters_->peak.load(); }
  // The most an allocation refused since the last reset would have made
  // live (0: none refused): what the code that ran out needed at least.
  Bytes refused() const { return counters_->refused.load(); }
  void reset_peak() {
    counters_->peak.store(counters_->live.load());
    counters_->refused.store(0);
  }
  long allocations() const { return counters_->allocations.load(); }
  // Allocations refused so far: an error after this rose was the budget's,
  // whatever type it reached the caller as.
  long refusals() const { return counters_->refusals.load(); }

  // budget < 0 removes it. While enforced, an allocation that would take
  // `live` over the budget throws OutOfBudget.
  void set_budget(Bytes budget) { counters_->budget.store(budget); }
  Bytes budget() const { return counters_->budget.load(); }
  void set_enforced(bool on) { counters_->enforced.store(on); }
  bool enforced() const { return counters_->enforced.load(); }

  // Blocks allocated from now on come from `source` (nullptr: the default).
  void allocate_from(c10::Allocator* source) { counters_->source.store(source); }

  // Charges every allocation from now on to `account` as well, and the
  // bytes live now at once (false, sharing nothing, when the account
  // refuses them); nullptr stops. The account must outlive the allocations
  // charged to it, or be detached first; an allocation freed after that is
  // refunded to the pool only. Set from the one thread that allocates then.
  bool share(SharedAccount* account);
  bool shared() const { return counters_->account.load() != nullptr; }

  // Before refusing an allocation for the enforced budget, asks `relief`
  // (memory_relief.h) to make room (nullptr: none). It must outlive the
  // allocations made while it is set.
  void relieve_with(MemoryRelief* relief) { counters_->relief.store(relief); }

  PoolCounters* counters() { return counters_; }

 private:
  PoolCounters* counters_;
};

}  // namespace memtrain::runtime
