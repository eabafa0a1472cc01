#include "data/cache_epochs.h"

#include <chrono>

#include "core/error.h"
#include "core/fnv1a.h"
#include "core/seconds_since.h"
#include "data/prep_pipeline.h"
#include "data/seeded_order.h"

namespace memtrain::data {

std::uint64_t sample_digest(std::int64_t index, const std::vector<std::uint8_t>& bytes) {
  Fnv1a h;
  // The index's bytes least significant first, whatever the machine's order.
  for (int i = 0; i < 8; ++i) {
    const auto b = static_cast<std::uint8_t>(static_cast<std::uint64_t>(index) >> (8 * i));
    h.add(&b, 1);
  }
  h.add(bytes.data(), bytes.size());
  return h.value();
}

namespace {

// The epochs' loop: `fetch` delivers a sample's bytes, `close` fills an
// epoch's counters from the fetcher's.
template <typename Fetch, typename Close>
std::vector<EpochReport> run_epochs(const ShardStorage& storage, const CacheEpochOptions& options, Fetch&& fetch,
                                    Close&& close) {
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world)
    throw UsageError("rank " + std::to_string(options.rank) + " is out of range for " + std::to_string(options.world) +
                     " ranks");
  const auto rank = static_cast<std::size_t>(options.rank), world = static_cast<std::size_t>(options.world);
  const auto n = static_cast<std::int64_t>(storage.samples().size());
  std::vector<EpochReport> reports;
  for (int e = 0; e < options.epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    const Bytes device_before = process_storage_read_bytes();
    EpochReport r;
    r.epoch = e;
    const std::vector<std::int64_t> order = epoch_order(n, options.seed, e);
    for (std::size_t p = rank; p < order.size(); p += world) {
      const std::int64_t i = order[p];
      const SampleCache::Sample bytes = fetch(i);
      r.digest += sample_digest(i, *bytes);
      ++r.samples;
      if (options.decode) prepare_sample(storage, i, *bytes);
    }
    if (options.barrier) options.barrier();
    close(r);
    if (options.barrier) options.barrier();
    const Bytes device_after = process_storage_read_bytes();
    if (device_before >= 0 && device_after >= 0) r.device_bytes_read = device_after - device_before;
    r.seconds = seconds_since(t0);
    reports.push_back(r);
  }
  return reports;
}

}  // namespace

std::vector<EpochReport> run_cache_epochs(const ShardStorage& storage, SampleCache& cache,
                                          const CacheEpochOptions& options) {
  cache.take_counters();  // count this run only
  return run_epochs(
      storage, options, [&](std::int64_t i) { return fetch_sample(storage, &cache, i, options.cold); },
      [&](EpochReport& r) {
        const CacheCounters c = cache.take_counters();
        r.storage_bytes_read = c.bytes_missed;
        r.hit_rate = c.hit_rate();
      });
}

std::vector<EpochReport> run_partitioned_epochs(const ShardStorage& storage, PartitionedSampleCache& cache,
                                                const CacheEpochOptions& options) {
  // No reset first: peers already in their first epoch may have been
  // served, and those reads belong to it.
  return run_epochs(
      storage, options, [&](std::int64_t i) { return cache.fetch(i); },
      [&](EpochReport& r) {
        const PartitionedCacheCounters c = cache.take_counters();
        r.storage_bytes_read = c.storage_bytes_read;
        r.peer_bytes_read = c.peer_bytes_read;
        r.bytes_served = c.bytes_served;
        r.hit_rate = c.lookups > 0 ? static_cast<double>(c.local_hits) / static_cast<double>(c.lookups) : 0.0;
      });
}

}  // namespace memtrain::data
