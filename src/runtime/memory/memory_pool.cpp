#include "runtime/memory/memory_pool.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/memory/memory_relief.h"
#include "runtime/memory/shared_account.h"

namespace memtrain::runtime {

namespace {

// Whether this thread is inside a relief: what it allocates is refused
// plainly, never relieved again.
thread_local bool t_relieving = false;

}  // namespace

bool PoolCounters::charge(Bytes bytes) {
  Bytes now = live.fetch_add(bytes) + bytes;
  Bytes limit = budget.load();
  // A relief may free memory or, where the budget is relative to what it
  // learns, raise the budget: both are seen on the next try.
  for (; enforced.load() && limit >= 0 && now > limit && bytes > 0; limit = budget.load()) {
    live.fetch_sub(bytes);
    MemoryRelief* r = relief.load();
    Bytes freed = 0;
    if (r != nullptr && !t_relieving) {
      t_relieving = true;
      try {
        freed = r->relieve(now - limit);
      } catch (...) {
        t_relieving = false;
        throw;
      }
      t_relieving = false;
    }
    if (freed > 0) {
      now = live.fetch_add(bytes) + bytes;
      continue;
    }
    Bytes most = refused.load();
    while (now > most && !refused.compare_exchange_weak(most, now)) {
    }
    refusals.fetch_add(1);
    const OutOfBudget why(name, bytes, now - bytes, limit);
    if (r != nullptr && !t_relieving) r->refuse(why);
    throw why;
  }
  // The shared budget holds whether or not this pool's own is enforced.
  SharedAccount* shared = account.load();
  if (shared && !shared->charge(bytes)) {
    live.fetch_sub(bytes);
    refusals.fetch_add(1);
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
  if (SharedAccount* a = account.load()) {
    if (shared) {
      a->refund(bytes);
    } else {
      // A block from before the account was set: its bytes came in the carried sum.
      Bytes left = carried.load();
      Bytes take = std::min(left, bytes);
      while (take > 0 && !carried.compare_exchange_weak(left, left - take)) take = std::min(left, bytes);
      if (take > 0) a->refund(take);
    }
  }
  release();
}

bool MemoryPool::share(SharedAccount* account) {
  if (account == nullptr) {
    counters_->account.store(nullptr);
    counters_->carried.store(0);
    return true;
  }
  const Bytes held = counters_->live.load();
  if (held > 0 && !account->charge(held)) return false;
  counters_->carried.store(held);
  counters_->account.store(account);
  return true;
}

void PoolCounters::release() {
  if (refs.fetch_sub(1) == 1) delete this;
}

MemoryPool::MemoryPool(std::string name) : counters_(new PoolCounters) { counters_->name = std::move(name); }

MemoryPool::~MemoryPool() { counters_->release(); }

}  // namespace memtrain::runtime
