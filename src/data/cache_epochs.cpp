#include "data/cache_epochs.h"

#include <chrono>

#include "core/seconds_since.h"
#include "data/prep_pipeline.h"
#include "data/seeded_order.h"

namespace memtrain::data {

std::vector<EpochReport> run_cache_epochs(const ShardStorage& storage, SampleCache& cache,
                                          const CacheEpochOptions& options) {
  const auto n = static_cast<std::int64_t>(storage.samples().size());
  std::vector<EpochReport> reports;
  cache.take_counters();  // count this run only
  for (int e = 0; e < options.epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    const Bytes device_before = process_storage_read_bytes();
    for (std::int64_t i : epoch_order(n, options.seed, e)) {
      const SampleCache::Sample bytes = fetch_sample(storage, &cache, i, options.cold);
      if (options.decode) prepare_sample(storage, i, *bytes);
    }
    const CacheCounters c = cache.take_counters();
    EpochReport r;
    r.epoch = e;
    r.samples = n;
    r.storage_bytes_read = c.bytes_missed;
    const Bytes device_after = process_storage_read_bytes();
    if (device_before >= 0 && device_after >= 0) r.device_bytes_read = device_after - device_before;
    r.hit_rate = c.hit_rate();
    r.seconds = seconds_since(t0);
    reports.push_back(r);
  }
  return reports;
}

}  // namespace memtrain::data
