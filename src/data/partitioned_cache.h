// CoorDL's partitioned cache: the ranks of a data-parallel job each own a
// disjoint, seeded part of the dataset and cache (minio: never evict) only
// what they own. A rank that needs a sample it does not own asks the owner
// over TCP; the owner answers from its cache, or reads the sample from
// storage once, keeps it and answers. Together the ranks' caches hold the
// dataset once instead of the same hot part N times, so from the second
// epoch on storage is read only for what does not fit.
//
// Sockets only (no c10d): the caller exchanges the ranks' addresses (the
// comm layer's store) and hands them to connect().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/units.h"
#include "data/sample_cache.h"
#include "data/shard_storage.h"

namespace memtrain::data {

// This machine's IPv4 address on the route to `host` (a name or address):
// where peers that reach `host` can reach this machine. 127.0.0.1 for a
// loopback host. Error naming `host` when it does not resolve.
std::string local_address_towards(const std::string& host);

// Which rank owns each of `n` samples: a seeded permutation cut into
// `world` contiguous parts of near-equal size (every rank's within one).
std::vector<int> partition_owners(std::int64_t n, int world, std::uint64_t seed);

struct PartitionedCacheCounters {
  std::int64_t lookups = 0;
  std::int64_t local_hits = 0;    // owned and cached here
  std::int64_t peer_fetches = 0;  // asked the owner
  Bytes storage_bytes_read = 0;   // read from storage by this rank (its own misses and its peers')
  Bytes peer_bytes_read = 0;      // received from peers
  Bytes bytes_served = 0;         // sent to peers
};

class PartitionedSampleCache {
 public:
  // Rank `rank` of `world`, caching up to `capacity` bytes of what it owns.
  // Listens on `listen_host` (an IPv4 address, a free port) at once; storage
  // must outlive it.
  // `timeout`: how long a peer may take to answer before it is named.
  PartitionedSampleCache(const ShardStorage& storage, Bytes capacity, int rank, int world, std::uint64_t seed,
                         bool cold, const std::string& listen_host, Seconds timeout);
  ~PartitionedSampleCache();
  PartitionedSampleCache(const PartitionedSampleCache&) = delete;
  PartitionedSampleCache& operator=(const PartitionedSampleCache&) = delete;

  // "HOST:PORT" where the others reach this rank.
  std::string address() const;
  // Every rank's address, in rank order (this rank's included). Checks each
  // peer holds the same dataset under the same partition; DataError naming
  // the peer otherwise.
  void connect(const std::vector<std::string>& addresses);

  // Sample `index`'s stored bytes: from this rank's cache, from its owner,
  // or from storage. Thread-safe. DataError naming the owner when it fails.
  SampleCache::Sample fetch(std::int64_t index);

  int owner(std::int64_t index) const { return owners_.at(static_cast<std::size_t>(index)); }
  // The counters since the last call, and reset them.
  PartitionedCacheCounters take_counters();
  const SampleCache& cache() const { return cache_; }

 private:
  struct Peer;
  SampleCache::Sample fetch_owned(std::int64_t index, bool* hit = nullptr);
  void serve(int fd);

  const ShardStorage& storage_;
  const int rank_, world_;
  const std::uint64_t seed_;
  const bool cold_;
  const Seconds timeout_;
  std::vector<int> owners_;
  SampleCache cache_;
  std::string host_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::thread acceptor_;
  std::mutex served_mutex_;
  std::vector<int> served_fds_;
  std::vector<std::thread> servers_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> lookups_{0}, local_hits_{0}, peer_fetches_{0};
  std::atomic<Bytes> storage_bytes_{0}, peer_bytes_{0}, served_bytes_{0};
};

}  // namespace memtrain::data
