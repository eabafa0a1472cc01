#include "runtime/memory/block_cache.h"

namespace memtrain::runtime {

void* BlockCache::take(size_t size) {
  if (size < kSmallest) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = blocks_.find(size);
  if (it == blocks_.end() || it->second.empty()) return nullptr;
  void* block = it->second.back();
  it->second.pop_back();
  cached_ -= size;
  return block;
}

bool BlockCache::keep(void* block, size_t size) {
  if (size < kSmallest) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (cached_ + size > limit_) return false;
  blocks_[size].push_back(block);
  cached_ += size;
  return true;
}

size_t BlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

}  // namespace memtrain::runtime
