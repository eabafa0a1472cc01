#include "runtime/memory/block_cache.h"

namespace memtrain::runtime {

void BlockCache::forget(std::multimap<size_t, ByAge::iterator>::iterator it) {
  cached_ -= it->first;
  by_age_.erase(it->second);
  by_size_.erase(it);
}

BlockCache::Block BlockCache::take(size_t size) {
  if (size < kSmallest) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_size_.lower_bound(size);
  if (it == by_size_.end() || it->first - size > it->first / kSlack) return {};
  // Equal sizes sit in the order kept: the last of them is the warmest.
  auto last = by_size_.upper_bound(it->first);
  it = std::prev(last);
  const Block block{it->second->second, it->first};
  forget(it);
  return block;
}

bool BlockCache::keep(void* block, size_t size) {
  if (size < kSmallest || size > limit_) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  while (cached_ + size > limit_) {
    const auto [oldest_size, oldest] = by_age_.front();
    auto [first, last] = by_size_.equal_range(oldest_size);
    while (first != last && first->second != by_age_.begin()) ++first;
    forget(first);
    release_(oldest);
  }
  by_age_.emplace_back(size, block);
  by_size_.emplace(size, std::prev(by_age_.end()));
  cached_ += size;
  return true;
}

size_t BlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

}  // namespace memtrain::runtime
