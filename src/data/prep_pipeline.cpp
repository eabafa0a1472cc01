#include "data/prep_pipeline.h"

#include <time.h>

#include <chrono>
#include <memory>

#include "core/error.h"
#include "core/seconds_since.h"
#include "data/seeded_order.h"

namespace memtrain::data {

Seconds thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

SampleCache::Sample fetch_sample(const ShardStorage& storage, SampleCache* cache, std::int64_t index, bool cold) {
  SampleCache::Sample bytes = cache ? cache->find(index) : nullptr;
  if (!bytes) {
    bytes = std::make_shared<const std::vector<std::uint8_t>>(storage.read(index, cold));
    if (cache) cache->offer(index, bytes);
  }
  return bytes;
}

PreparedSample prepare_sample(const ShardStorage& storage, std::int64_t index, const std::vector<std::uint8_t>& bytes) {
  const ShardSample s = storage.parse(index, bytes);
  PreparedSample p;
  p.index = index;
  p.key = s.key;
  for (const auto& [ext, file] : s.files) {
    if (ext == "jpg") {
      p.image = decode_gray_jpeg(file, storage.where(index) + " (sample " + s.key + ")");
    } else if (ext == "txt") {
      p.text.assign(file.begin(), file.end());
    } else if (ext == "cls" || ext == "tags") {
      p.label.assign(file.begin(), file.end());
    }
  }
  return p;
}

PrepPipeline::PrepPipeline(const ShardStorage& storage, SampleCache* cache, PrepOptions options)
    : storage_(storage), cache_(cache), options_(options) {
  if (options_.threads < 1)
    throw UsageError("prep threads " + std::to_string(options_.threads) + " is out of range; expected >= 1");
  if (options_.queue_depth < 1)
    throw UsageError("prefetch depth " + std::to_string(options_.queue_depth) + " is out of range; expected >= 1");
  start_epoch();
}

PrepPipeline::~PrepPipeline() { stop_threads(); }

void PrepPipeline::start_epoch() {
  order_ = epoch_order(static_cast<std::int64_t>(storage_.samples().size()), options_.seed, epoch_);
  positions_.clear();
  for (std::int64_t p = 0; p < static_cast<std::int64_t>(order_.size()); ++p) {
    if (!options_.keep || options_.keep(p)) positions_.push_back(p);
  }
  claimed_ = consumed_ = 0;
  done_.clear();
  stopping_ = false;
  for (int t = 0; t < options_.threads; ++t) threads_.emplace_back([this] { work(); });
}

void PrepPipeline::stop_threads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  room_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

PrepPipeline::Slot PrepPipeline::prepare(std::int64_t position) const {
  const std::int64_t index = order_[position];
  Slot slot;
  try {
    const SampleCache::Sample bytes =
        options_.fetch ? options_.fetch(index) : fetch_sample(storage_, cache_, index, options_.cold);
    PreparedSample p = prepare_sample(storage_, index, *bytes);
    p.epoch = epoch_;
    p.position = position;
    if (options_.transform) options_.transform(p);
    slot.sample = std::move(p);
  } catch (const DataError& e) {
    if (!options_.skip_corrupt)
      slot.error = e.what();
    else
      slot.error = std::string("skip:") + e.what();
  }
  return slot;
}

void PrepPipeline::work() {
  while (true) {
    std::int64_t entry = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Bounded: a worker may run at most queue_depth positions ahead of the consumer.
      room_.wait(lock, [&] {
        return stopping_ || claimed_ >= static_cast<std::int64_t>(positions_.size()) ||
               claimed_ < consumed_ + options_.queue_depth;
      });
      if (stopping_ || claimed_ >= static_cast<std::int64_t>(positions_.size())) return;
      entry = claimed_++;
    }
    const Seconds cpu0 = thread_cpu_seconds();
    Slot slot = prepare(positions_[entry]);
    const Seconds cpu = thread_cpu_seconds() - cpu0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      counters_.prep_cpu_seconds += cpu;
      done_.emplace(entry, std::move(slot));
    }
    ready_.notify_all();
  }
}

std::optional<PreparedSample> PrepPipeline::next() {
  while (true) {
    if (consumed_ >= static_cast<std::int64_t>(positions_.size())) {
      stop_threads();
      ++epoch_;
      start_epoch();
      return std::nullopt;
    }
    Slot slot;
    {
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return done_.count(consumed_) > 0; });
      counters_.consumer_wait_seconds += seconds_since(t0);
      slot = std::move(done_.at(consumed_));
      done_.erase(consumed_);
      ++consumed_;
    }
    room_.notify_all();
    if (slot.sample) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++counters_.delivered;
      return std::move(slot.sample);
    }
    if (slot.error.rfind("skip:", 0) == 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++counters_.skipped_corrupt;
      counters_.skipped.push_back(slot.error.substr(5));
      continue;
    }
    throw DataError(slot.error);
  }
}

PrepCounters PrepPipeline::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

}  // namespace memtrain::data
