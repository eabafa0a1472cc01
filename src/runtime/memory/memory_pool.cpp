#include "runtime/memory/memory_pool.h"

#include "core/error.h"

namespace memtrain::runtime {

void PoolCounters::charge(Bytes bytes) {
  const Bytes now = live.fetch_add(bytes) + bytes;
  const Bytes limit = budget.load();
  if (enforced.load() && limit >= 0 && now > limit) {
    live.fetch_sub(bytes);
    throw OutOfBudget(name, bytes, now - bytes, limit);
  }
  Bytes seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  allocations.fetch_add(1);
  refs.fetch_add(1);
}

void PoolCounters::refund(Bytes bytes) {
  live.fetch_sub(bytes);
  release();
}

void PoolCounters::release() {
  if (refs.fetch_sub(1) == 1) delete this;
}

MemoryPool::MemoryPool(std::string name) : counters_(new PoolCounters) { counters_->name = std::move(name); }

MemoryPool::~MemoryPool() { counters_->release(); }

}  // namespace memtrain::runtime
