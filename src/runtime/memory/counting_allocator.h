// memtrain's CPU allocator: wraps LibTorch's default one and charges every
// tensor allocation to the MemoryPool selected on the allocating thread.
// Installed once per process; harmless to call again.
#pragma once

#include "core/error.h"
#include "runtime/memory/memory_pool.h"

namespace memtrain::runtime {

void install_counting_allocator();

// Routes this thread's allocations to `pool` until destroyed (nullptr: to
// no pool). Scopes nest. LibTorch allocates on the calling thread for the
// CPU work memtrain runs (checked by tests/runtime), so a thread-local
// selection sees every tensor of a step.
class PoolScope {
 public:
  explicit PoolScope(MemoryPool* pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  PoolCounters* previous_;
};

// The last allocation on this thread a pool refused (OutOfBudget), or null.
// Code that calls the allocator through a layer that rewraps errors (a
// Python stage: LibTorch's bindings turn it into a RuntimeError) recovers
// the refusal from here, comparing refusals_on_this_thread() before and after.
const OutOfBudget* last_refusal_on_this_thread();
long refusals_on_this_thread();

// Whether this thread's allocations are charged to `pool` now.
bool charges_on_this_thread(MemoryPool& pool);

// Bytes allocated outside any pool and still live, process-wide: tensors
// created before a scope was entered, or on threads that never entered one.
Bytes unpooled_live_bytes();

}  // namespace memtrain::runtime
