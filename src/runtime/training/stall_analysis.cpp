#include "runtime/training/stall_analysis.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "core/seconds_since.h"
#include "data/pipeline_rates.h"
#include "predict/stall_shares.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// What the trainer reads from: one of the pipeline runs, or (synthetic) the
// batches recorded from one, replayed from host memory with no preparation.
class SwitchedSource : public BatchSource {
 public:
  explicit SwitchedSource(ShardImageBatches& first) : first_(first), current_(&first) {}

  void use(ShardImageBatches& source, bool record) {
    current_ = &source;
    record_ = record;
    if (record) recorded_.clear();
  }
  void replay() {
    if (recorded_.empty()) throw Error("stall analysis: nothing recorded to replay");
    current_ = nullptr;
    replayed_ = 0;
  }

  Batch next(const torch::Device& device) override {
    if (!current_) return ShardImageBatches::to_tensors(recorded_[replayed_++ % recorded_.size()], device);
    data::AugmentedBatch b = current_->next_augmented();
    if (record_) recorded_.push_back(b);
    return ShardImageBatches::to_tensors(b, device);
  }
  Batch largest(const torch::Device& device) override { return first_.largest(device); }
  std::string describe() const override { return first_.describe(); }
  std::int64_t epoch() const override { return current_ ? current_->epoch() : 0; }
  std::int64_t batches_per_epoch() const override { return first_.batches_per_epoch(); }

 private:
  ShardImageBatches& first_;
  ShardImageBatches* current_;
  bool record_ = false;
  std::vector<data::AugmentedBatch> recorded_;
  size_t replayed_ = 0;
};

ShardSourceOptions with_cache(ShardSourceOptions o, double fraction, int threads) {
  o.batches.prep.threads = threads;
  if (fraction > 0) {
    o.cache_size = BudgetSpec{true, 100 * fraction, 0};
    o.cache_policy = data::CachePolicy::minio;
  } else {
    o.cache_size.reset();
  }
  return o;
}

Seconds run_epoch(Trainer& trainer, std::int64_t steps) {
  const Clock::time_point t0 = Clock::now();
  for (std::int64_t s = 0; s < steps; ++s) trainer.step();
  return seconds_since(t0);
}

}  // namespace

StallReport analyse_stalls(const Trainer::ModelFactory& model, DeviceMemory& memory, const StallOptions& options,
                           const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  for (const auto& [fraction, threads] : options.checks) {
    if (!(fraction >= 0 && fraction <= 1) || threads < 1) {
      throw UsageError("stall check (" + std::to_string(fraction) + ", " + std::to_string(threads) +
                       " threads) is out of range; expected a cache fraction in 0..1 and >= 1 thread");
    }
  }
  const int threads = options.source.batches.prep.threads;
  ShardImageBatches cached(with_cache(options.source, 1.0, threads));
  SwitchedSource source(cached);
  Trainer trainer(options.trainer, memory, model, source);
  trainer.calibrate();
  const std::int64_t steps = cached.batches_per_epoch();

  StallReport r;
  r.samples = static_cast<std::int64_t>(cached.storage().samples().size());
  r.threads = threads;
  say("warm-up epoch: fills the cache and makes every plan");
  run_epoch(trainer, steps);
  say("cached epoch");
  source.use(cached, /*record=*/true);
  r.cached_seconds = run_epoch(trainer, steps);
  say("synthetic epoch: the cached epoch's batches replayed from memory");
  source.replay();
  r.synthetic_seconds = run_epoch(trainer, steps);
  say("cold epoch");
  {
    ShardImageBatches cold(with_cache(options.source, 0, threads));
    source.use(cold, false);
    r.cold_seconds = run_epoch(trainer, steps);
    source.use(cached, false);
  }
  const data::ShardStorage& storage = cached.storage();
  say("the pipeline alone: prep from memory and cold fetches");
  data::ShardBatchOptions one = options.source.batches;
  one.prep.threads = 1;
  const double prep_one = data::measure_prep_rate(storage, one).rate();
  r.prep_rate = data::measure_prep_rate(storage, options.source.batches).rate();
  const std::uint64_t seed = options.source.batches.seed;
  const double fetch_one = data::measure_fetch_rate(storage, 1, seed + 1, 0).rate();
  r.fetch_rate = data::measure_fetch_rate(storage, threads, seed + 2, 0).rate();

  const auto n = static_cast<double>(r.samples);
  r.ingestion_rate = n / r.synthetic_seconds;
  r.stalls = predict::stall_shares(r.synthetic_seconds, r.cached_seconds, r.cold_seconds);
  r.rates = {r.ingestion_rate, prep_one, fetch_one, options.prep_cores};
  for (double fraction : options.cache_fractions) {
    for (int t = 1; t <= options.max_threads; ++t)
      r.what_if.push_back(predict::predict_epoch(r.rates, r.samples, fraction, t));
  }
  for (const auto& [fraction, t] : options.checks) {
    say("check: cache " + std::to_string(static_cast<int>(std::lround(100 * fraction))) + "%, " + std::to_string(t) +
        " prep threads");
    ShardImageBatches run(with_cache(options.source, fraction, t));
    source.use(run, false);
    if (fraction > 0) run_epoch(trainer, steps);  // the first epoch fills the cache
    StallCheck c;
    c.predicted = predict::predict_epoch(r.rates, r.samples, fraction, t);
    c.measured_seconds = run_epoch(trainer, steps);
    c.relative_error = std::abs(c.predicted.epoch_seconds - c.measured_seconds) / c.measured_seconds;
    r.checks.push_back(c);
    source.use(cached, false);
  }
  return r;
}

}  // namespace memtrain::runtime
