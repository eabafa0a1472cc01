// DS-Analyzer's what-if model of an input-bound epoch: training consumes
// samples at the ingestion rate G (what the model trains at on data already
// in memory); the prep threads produce them, each spending 1/P1 seconds of
// CPU to decode and augment a sample and, on a cache miss, 1/F1 seconds
// waiting for storage. A miss costs a thread time but no core, so p threads
// make min(p / (1/P1 + miss/F1), cores * P1) samples/s, and with the
// prefetch queue overlapping the two, an epoch of N samples takes
// N / min(G, that). With a minio cache holding a fraction x of the dataset,
// every epoch after the first misses exactly 1 - x of its samples.
#pragma once

#include <cstdint>
#include <string>

#include "core/units.h"

namespace memtrain::predict {

struct StallRates {
  double ingestion_rate = 0;         // G, samples/s
  double prep_rate_one_thread = 0;   // P1, samples/s of one thread on cached data
  double fetch_rate_one_thread = 0;  // F1, samples/s of one thread reading cold
  int prep_cores = 1;                // cores the prep threads have beside training
};

// Error naming the rate for a rate that is not positive and finite.
void check_stall_rates(const StallRates& rates);

// Samples/s the prep threads deliver with a cache holding `cache_fraction`
// (0..1) of the dataset, from its second epoch on.
double pipeline_rate(const StallRates& rates, double cache_fraction, int threads);

struct EpochPrediction {
  double cache_fraction = 0;
  int threads = 0;
  Seconds epoch_seconds = 0;
  std::string bottleneck;  // "ingestion", "prep" or "fetch"
};

EpochPrediction predict_epoch(const StallRates& rates, std::int64_t samples, double cache_fraction, int threads);

}  // namespace memtrain::predict
