// Large freed blocks of the counted pools, kept for the next allocation of
// a size they can hold, as a GPU's caching allocator keeps device memory.
// glibc maps each block this large on its own and unmaps it when freed, so
// without the cache every large tensor of a CPU "device" lands on fresh
// pages, and a first touch costs a page fault (about 11 us per 4 KiB page
// measured on this VM, so a 16 MiB copy ran at 0.35 GB/s instead of
// 17 GB/s, in some runs and not others). Sizes change with every input
// size, so a block serves requests a little smaller than itself, and the
// coldest blocks make room for new sizes.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <utility>

namespace memtrain::runtime {

class BlockCache {
 public:
  // Smaller blocks go straight back: glibc keeps them in its heap (the
  // largest threshold below which it does not map a block of its own).
  static constexpr size_t kSmallest = size_t{32} << 20;
  // A block serves a request of at least (kSlack - 1) / kSlack of its size.
  static constexpr size_t kSlack = 8;
  using Release = void (*)(void* block);

  // `release` frees a block the cache gives up to make room.
  BlockCache(size_t limit, Release release) : limit_(limit), release_(release) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  struct Block {
    void* data = nullptr;  // nullptr: none cached fits
    size_t size = 0;       // the whole block's size, at least the request
  };
  // The smallest cached block that holds `size` bytes without wasting more
  // than its kSlack-th part (the warmest of equal ones).
  Block take(size_t size);
  // Keeps `block` of `size` bytes if it is large and not over the limit by
  // itself, releasing the least recently kept blocks to make room; false:
  // the caller frees it.
  bool keep(void* block, size_t size);
  size_t cached_bytes() const;

 private:
  using ByAge = std::list<std::pair<size_t, void*>>;  // oldest first
  void forget(std::multimap<size_t, ByAge::iterator>::iterator it);

  mutable std::mutex mutex_;
  ByAge by_age_;
  std::multimap<size_t, ByAge::iterator> by_size_;
  size_t cached_ = 0;
  size_t limit_;
  Release release_;
};

}  // namespace memtrain::runtime
