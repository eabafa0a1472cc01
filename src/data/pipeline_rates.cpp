#include "data/pipeline_rates.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/seconds_since.h"
#include "data/sample_cache.h"
#include "data/seeded_order.h"

namespace memtrain::data {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

RateMeasurement measure_prep_rate(const ShardStorage& storage, const ShardBatchOptions& options) {
  SampleCache cache(storage.dataset_bytes(), CachePolicy::minio);
  const auto n = static_cast<std::int64_t>(storage.samples().size());
  for (std::int64_t i = 0; i < n; ++i) fetch_sample(storage, &cache, i, /*cold=*/false);
  const Clock::time_point t0 = Clock::now();
  ShardImageBatcher batcher(storage, &cache, options);  // its threads start here
  RateMeasurement m;
  for (std::int64_t b = 0; b < batcher.batches_per_epoch(); ++b) m.samples += batcher.next().batch;
  m.seconds = seconds_since(t0);
  return m;
}

RateMeasurement measure_fetch_rate(const ShardStorage& storage, int threads, std::uint64_t seed, std::int64_t limit) {
  if (threads < 1) throw UsageError("fetch threads " + std::to_string(threads) + " is out of range; expected >= 1");
  std::vector<std::int64_t> order = epoch_order(static_cast<std::int64_t>(storage.samples().size()), seed, 0);
  if (limit > 0 && limit < static_cast<std::int64_t>(order.size())) order.resize(static_cast<size_t>(limit));
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::string failure;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      try {
        for (std::int64_t i = next++; i < static_cast<std::int64_t>(order.size()) && !failed; i = next++) {
          storage.read(order[static_cast<size_t>(i)], /*cold=*/true);
        }
      } catch (const std::exception& e) {
        if (!failed.exchange(true)) failure = e.what();  // the first failure only
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (failed) throw DataError(failure);
  RateMeasurement m;
  m.samples = static_cast<std::int64_t>(order.size());
  m.seconds = seconds_since(t0);
  return m;
}

}  // namespace memtrain::data
