// Large freed blocks of the counted pools, kept for the next allocation of
// the same size, as a GPU's caching allocator keeps device memory. Without
// it every large tensor of a CPU "device" lands on fresh pages: glibc's
// aligned allocations of a size just freed do not reuse the freed chunk, and
// a first touch costs a page fault (about 11 us per 4 KiB page measured on
// this VM, so a 16 MiB copy ran at 0.35 GB/s instead of 17 GB/s, in some
// runs and not others).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace memtrain::runtime {

class BlockCache {
 public:
  static constexpr size_t kSmallest = size_t{1} << 20;  // smaller blocks go straight back
  explicit BlockCache(size_t limit) : limit_(limit) {}

  // The block of exactly `size` bytes cached last (the warmest), or nullptr.
  void* take(size_t size);
  // Keeps `block` of `size` bytes if it is large and the cache has room;
  // false: the caller frees it.
  bool keep(void* block, size_t size);
  size_t cached_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> blocks_;  // by size, in the order kept
  size_t cached_ = 0;
  size_t limit_;
};

}  // namespace memtrain::runtime
