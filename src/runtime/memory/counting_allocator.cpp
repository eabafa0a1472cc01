// Each block carries a 64-byte header in front of the tensor's data with the
// pool it was charged to and its size. The DataPtr's context is the data
// pointer itself, which keeps LibTorch's raw_allocate/raw_deallocate API
// working, and needs no side table or per-allocation heap object.
#include "runtime/memory/counting_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "runtime/memory/block_cache.h"

namespace memtrain::runtime {

namespace {

constexpr size_t kHeader = 64;  // keeps LibTorch's 64-byte data alignment

struct Header {
  PoolCounters* pool;  // nullptr: unpooled
  Bytes bytes;         // the tensor's request, header excluded
  // A block from a pool's own source (pinned memory) is held by that
  // allocator's DataPtr, whose context need not be its data; nullptr: the
  // block came from LibTorch's default CPU allocator.
  c10::DataPtr* held;
  bool shared;      // also charged to the pool's shared account
  size_t capacity;  // the block's size, header included (a cached block may be larger than asked)
};
static_assert(sizeof(Header) <= kHeader, "header must fit its slot");

thread_local PoolCounters* t_current = nullptr;
thread_local long t_refusals = 0;
thread_local std::unique_ptr<OutOfBudget> t_last_refusal;
std::atomic<Bytes> g_unpooled{0};
c10::Allocator* g_base = nullptr;
// Pooled blocks from g_base that glibc would map and unmap (see
// keep_freed_memory_in_process); 1 GiB at most, the coldest given back.
// Never destroyed: tensors may be freed during the process's exit.
void release_to_base(void* block) { g_base->raw_deallocate(block); }
BlockCache& block_cache() {
  static auto* cache = new BlockCache(size_t{1} << 30, &release_to_base);
  return *cache;
}

void free_block(void* data) {
  if (!data) return;
  char* block = static_cast<char*>(data) - kHeader;
  const Header h = *reinterpret_cast<Header*>(block);
  if (h.pool)
    h.pool->refund(h.bytes, h.shared);
  else
    g_unpooled.fetch_sub(h.bytes);
  if (h.held)
    delete h.held;
  else if (!(h.pool && block_cache().keep(block, h.capacity)))
    g_base->raw_deallocate(block);
}

// LibTorch 2.3 made allocate() non-const and added copy_data().
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define MEMTRAIN_ALLOCATE_CONST
#define MEMTRAIN_HAS_COPY_DATA 1
#else
#define MEMTRAIN_ALLOCATE_CONST const
#define MEMTRAIN_HAS_COPY_DATA 0
#endif

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) MEMTRAIN_ALLOCATE_CONST override {
    PoolCounters* pool = t_current;
    const Bytes bytes = static_cast<Bytes>(n);
    bool shared = false;
    if (pool) {
      try {
        shared = pool->charge(bytes);  // throws OutOfBudget before anything is allocated
      } catch (const OutOfBudget& refused) {
        ++t_refusals;
        t_last_refusal = std::make_unique<OutOfBudget>(refused);
        throw;
      }
    } else
      g_unpooled.fetch_add(bytes);
    c10::Allocator* source = pool ? pool->source.load() : nullptr;
    char* block = nullptr;
    size_t capacity = n + kHeader;
    c10::DataPtr* held = nullptr;
    try {
      if (source) {
        held = new c10::DataPtr(source->allocate(n + kHeader));
        block = static_cast<char*>(held->get());
      } else {
        if (pool) {
          const BlockCache::Block cached = block_cache().take(capacity);
          block = static_cast<char*>(cached.data);
          if (block) capacity = cached.size;
        }
        if (!block) block = static_cast<char*>(g_base->raw_allocate(capacity));
      }
    } catch (...) {
      delete held;
      if (pool)
        pool->refund(bytes, shared);
      else
        g_unpooled.fetch_sub(bytes);
      throw;
    }
    *reinterpret_cast<Header*>(block) = Header{pool, bytes, held, shared, capacity};
    void* data = block + kHeader;
    return c10::DataPtr(data, data, &free_block, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
#if MEMTRAIN_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif
};

// A CPU "device" keeps the memory it freed, as a GPU's caching allocator
// does: glibc's defaults map each block above a threshold that grows with
// the blocks freed (up to 32 MiB) and give the heap's free top back, so a
// training step of a new input size lands on fresh pages. A first touch
// costs a page fault, about 11 us per 4 KiB page on this VM and more when
// other processes run between two steps (three trainers taking turns: 2x
// slower steps than alone). Fixed thresholds keep blocks below 32 MiB in
// the heap, where glibc splits and merges them; larger ones go to the
// BlockCache. Settings the user made with glibc's MALLOC_*_ variables win.
void keep_freed_memory_in_process() {
#if defined(__GLIBC__)
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, static_cast<int>(BlockCache::kSmallest));
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

}  // namespace

void install_counting_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    keep_freed_memory_in_process();
    g_base = c10::GetDefaultCPUAllocator();
    static CountingAllocator allocator;
    // Priority above the default (0) so later default registrations keep ours.
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
  });
}

PoolScope::PoolScope(MemoryPool* pool) : previous_(t_current) {
  install_counting_allocator();
  t_current = pool ? pool->counters() : nullptr;
}

PoolScope::~PoolScope() { t_current = previous_; }

const OutOfBudget* last_refusal_on_this_thread() { return t_last_refusal.get(); }

long refusals_on_this_thread() { return t_refusals; }

bool charges_on_this_thread(MemoryPool& pool) { return t_current == pool.counters(); }

Bytes unpooled_live_bytes() { return g_unpooled.load(); }

}  // namespace memtrain::runtime
