#include "predict/stall_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memtrain::predict {

namespace {
void require_rate(double rate, const char* name) {
  if (!(rate > 0) || !std::isfinite(rate)) {
    throw Error(std::string("stall model: ") + name + " " + std::to_string(rate) +
                " is not a rate; expected a positive number of samples/s");
  }
}
}  // namespace

void check_stall_rates(const StallRates& r) {
  require_rate(r.ingestion_rate, "ingestion rate");
  require_rate(r.prep_rate_one_thread, "prep rate");
  require_rate(r.fetch_rate_one_thread, "fetch rate");
  if (r.prep_cores < 1)
    throw Error("stall model: prep cores " + std::to_string(r.prep_cores) + " is out of range; expected >= 1");
}

double pipeline_rate(const StallRates& r, double cache_fraction, int threads) {
  check_stall_rates(r);
  if (!(cache_fraction >= 0 && cache_fraction <= 1)) {
    throw UsageError("cache fraction " + std::to_string(cache_fraction) + " is out of range; expected 0..1");
  }
  if (threads < 1) throw UsageError("prep threads " + std::to_string(threads) + " is out of range; expected >= 1");
  const double per_sample = 1 / r.prep_rate_one_thread + (1 - cache_fraction) / r.fetch_rate_one_thread;
  return std::min(threads / per_sample, r.prep_cores * r.prep_rate_one_thread);
}

EpochPrediction predict_epoch(const StallRates& r, std::int64_t samples, double cache_fraction, int threads) {
  const double pipeline = pipeline_rate(r, cache_fraction, threads);
  EpochPrediction p;
  p.cache_fraction = cache_fraction;
  p.threads = threads;
  p.epoch_seconds = static_cast<double>(samples) / std::min(r.ingestion_rate, pipeline);
  if (r.ingestion_rate <= pipeline) {
    p.bottleneck = "ingestion";
  } else if (pipeline >= r.prep_cores * r.prep_rate_one_thread) {
    p.bottleneck = "prep";  // the cores are busy decoding
  } else {
    // Which cost holds each thread back more: decoding or waiting for misses.
    const double fetch_share = (1 - cache_fraction) / r.fetch_rate_one_thread;
    p.bottleneck = fetch_share > 1 / r.prep_rate_one_thread ? "fetch" : "prep";
  }
  return p;
}

}  // namespace memtrain::predict
