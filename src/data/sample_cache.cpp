#include "data/sample_cache.h"

#include "core/error.h"

namespace memtrain::data {

CachePolicy parse_cache_policy(const std::string& text, const std::string& what) {
  if (text == "lru") return CachePolicy::lru;
  if (text == "minio") return CachePolicy::minio;
  throw UsageError(what + " '" + text + "' is not a cache policy; expected lru or minio");
}

std::string cache_policy_name(CachePolicy policy) { return policy == CachePolicy::lru ? "lru" : "minio"; }

double CacheCounters::hit_rate() const {
  const std::int64_t lookups = hits + misses;
  return lookups > 0 ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0;
}

SampleCache::SampleCache(Bytes capacity, CachePolicy policy) : capacity_(capacity), policy_(policy) {
  if (capacity < 0)
    throw UsageError("cache capacity " + std::to_string(capacity) + " bytes is out of range; expected >= 0");
}

SampleCache::Sample SampleCache::find(std::int64_t key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++counters_.misses;
    return nullptr;
  }
  ++counters_.hits;
  counters_.bytes_hit += static_cast<Bytes>(it->second.bytes->size());
  if (policy_ == CachePolicy::lru) recency_.splice(recency_.begin(), recency_, it->second.recency);
  return it->second.bytes;
}

void SampleCache::offer(std::int64_t key, Sample bytes) {
  if (!bytes) throw Error("sample cache: offered no bytes for sample " + std::to_string(key));
  const auto size = static_cast<Bytes>(bytes->size());
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.bytes_missed += size;
  if (entries_.count(key) || size > capacity_) return;  // another thread got there first, or it never fits
  if (policy_ == CachePolicy::minio) {
    if (size_ + size > capacity_) return;
    entries_.emplace(key, Entry{std::move(bytes), recency_.end()});
    size_ += size;
    return;
  }
  while (size_ + size > capacity_) {
    const std::int64_t oldest = recency_.back();
    recency_.pop_back();
    const auto victim = entries_.find(oldest);
    size_ -= static_cast<Bytes>(victim->second.bytes->size());
    entries_.erase(victim);
  }
  recency_.push_front(key);
  entries_.emplace(key, Entry{std::move(bytes), recency_.begin()});
  size_ += size;
}

CacheCounters SampleCache::take_counters() {
  std::lock_guard<std::mutex> lock(mutex_);
  const CacheCounters c = counters_;
  counters_ = {};
  return c;
}

Bytes SampleCache::size_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

std::int64_t SampleCache::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::int64_t>(entries_.size());
}

}  // namespace memtrain::data
