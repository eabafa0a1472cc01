// An in-memory cache of encoded samples (the bytes as read from storage),
// with a byte capacity and one of two policies:
// - lru: evict the least recently used sample to make room, as the OS page
//   cache does; with a new random order each epoch and a dataset larger than
//   the cache, what it keeps is mostly what the next epoch wants last, so it
//   thrashes;
// - minio (CoorDL): keep what arrives while there is room and never evict, so
//   from the second epoch on every epoch hits exactly the cached fraction.
// Thread-safe: prep threads look up and offer concurrently.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/units.h"

namespace memtrain::data {

enum class CachePolicy { lru, minio };

// "lru" or "minio"; UsageError naming `what` and both otherwise.
CachePolicy parse_cache_policy(const std::string& text, const std::string& what);
std::string cache_policy_name(CachePolicy policy);

struct CacheCounters {
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  Bytes bytes_hit = 0;
  Bytes bytes_missed = 0;   // what the caller had to read from storage
  double hit_rate() const;  // of lookups; 0 with none
};

class SampleCache {
 public:
  using Sample = std::shared_ptr<const std::vector<std::uint8_t>>;

  SampleCache(Bytes capacity, CachePolicy policy);

  // The cached bytes of sample `key`, or null (a miss); counted either way.
  // A hit makes the sample the most recently used (lru).
  Sample find(std::int64_t key);
  // After a miss: the bytes read from storage, counted as missed. lru
  // evicts the least recently used samples to make room; minio keeps them
  // only if they fit in what is left. A sample larger than the whole
  // capacity is never kept.
  void offer(std::int64_t key, Sample bytes);

  // The counters since the last call (an epoch's), and reset them.
  CacheCounters take_counters();
  Bytes size_bytes() const;
  std::int64_t samples() const;
  Bytes capacity() const { return capacity_; }
  CachePolicy policy() const { return policy_; }

 private:
  struct Entry {
    Sample bytes;
    std::list<std::int64_t>::iterator recency;  // position in recency_ (lru only)
  };
  const Bytes capacity_;
  const CachePolicy policy_;
  mutable std::mutex mutex_;
  std::unordered_map<std::int64_t, Entry> entries_;
  std::list<std::int64_t> recency_;  // most recently used first (lru only)
  Bytes size_ = 0;
  CacheCounters counters_;
};

}  // namespace memtrain::data
