#include "runtime/memory/memory_pool.h"

#include "core/error.h"
#include "runtime/memory/shared_account.h"

namespace memtrain::runtime {

bool PoolCounters::charge(Bytes bytes) {
  const Bytes now = live.fetch_add(bytes) + bytes;
  const Bytes limit = budget.load();
  if (enforced.load() && limit >= 0 && now > limit) {
    live.fetch_sub(bytes);
    Bytes most = refused.load();
    while (now > most && !refused.compare_exchange_weak(most, now)) {
    }
    throw OutOfBudget(name, bytes, now - bytes, limit);
  }
  // The shared budget holds whether or not this pool's own is enforced.
  SharedAccount* shared = account.load();
  if (shared && !shared->charge(bytes)) {
    live.fetch_sub(bytes);
    throw OutOfBudget(shared->name(), bytes, shared->live(), shared->budget());
  }
  Bytes seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  allocations.fetch_add(1);
  refs.fetch_add(1);
  return shared != nullptr;
}

void PoolCounters::refund(Bytes bytes, bool shared) {
  live.fetch_sub(bytes);
  if (shared) {
    if (SharedAccount* a = account.load()) a->refund(bytes);
  }
  release();
}

void PoolCounters::release() {
  if (refs.fetch_sub(1) == 1) delete this;
}

MemoryPool::MemoryPool(std::string name) : counters_(new PoolCounters) { counters_->name = std::move(name); }

MemoryPool::~MemoryPool() { counters_->release(); }

}  // namespace memtrain::runtime
