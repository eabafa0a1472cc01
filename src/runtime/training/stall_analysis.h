// DS-Analyzer's stall analysis for training from packed shards. One trainer
// runs whole epochs of the same batches three ways:
//   synthetic  the batches replayed from memory, already prepared: the rate
//              the model ingests samples at;
//   cached     through the pipeline with every sample in the cache: what
//              decoding and augmenting add (the prep stall);
//   cold       through the pipeline reading every sample cold from storage:
//              what fetching adds (the fetch stall).
// The pipeline's two costs are also measured alone with one thread, and the
// stall model (predict/stall_model.h) predicts epoch times for other cache
// sizes and thread counts; some of those are then run to check them.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "predict/stall_model.h"
#include "predict/stall_shares.h"
#include "runtime/input/shard_image_batches.h"
#include "runtime/memory/device_memory.h"
#include "runtime/training/trainer.h"

namespace memtrain::runtime {

struct StallOptions {
  ShardSourceOptions source;  // its prep threads and cache settings are the measured runs'
  TrainerOptions trainer;
  std::vector<double> cache_fractions = {0, 0.25, 0.5, 0.75, 1};    // what-if rows
  int max_threads = 4;                                              // what-if threads 1..max_threads
  std::vector<std::pair<double, int>> checks = {{0, 1}, {0.5, 2}};  // (cache fraction, threads) to run
  int prep_cores = 1;                                               // cores the prep threads have beside training
};

struct StallCheck {
  predict::EpochPrediction predicted;
  Seconds measured_seconds = 0;
  double relative_error = 0;  // |predicted - measured| / measured
};

struct StallReport {
  std::int64_t samples = 0;                                             // per epoch
  int threads = 0;                                                      // prep threads of the cached and cold runs
  Seconds synthetic_seconds = 0, cached_seconds = 0, cold_seconds = 0;  // epoch times
  double ingestion_rate = 0;                                            // samples/s, synthetic
  double prep_rate = 0;         // samples/s the pipeline prepares from memory alone, `threads` threads
  double fetch_rate = 0;        // samples/s read cold from storage alone, `threads` threads
  predict::StallShares stalls;  // the prep and fetch shares of the cold epoch, and the order noise
  predict::StallRates rates;    // the model's inputs
  std::vector<predict::EpochPrediction> what_if;
  std::vector<StallCheck> checks;
};

// `progress` (may be empty) hears what is being measured.
StallReport analyse_stalls(const Trainer::ModelFactory& model, DeviceMemory& memory, const StallOptions& options,
                           const std::function<void(const std::string&)>& progress);

}  // namespace memtrain::runtime
