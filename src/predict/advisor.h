// The advisor: given each method's fitted model and a device's memory, the
// largest batch each method fits, the batch with its highest predicted
// throughput, and the method to use: the one with the highest throughput at
// its best batch. Under the model throughput grows with the batch while the
// device is under-used; beyond the knee it keeps growing when c > 0 and falls
// when c < 0 (a step that gets slower per sample as it grows, as caches
// overflow on a CPU), so the best batch is the largest that fits or the knee.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"
#include "predict/throughput_model.h"

namespace memtrain::predict {

struct MethodAdvice {
  std::string method;
  ThroughputModel model;
  std::int64_t max_batch = 0;       // 0: not even batch 1 fits
  std::int64_t best_batch = 0;      // highest predicted throughput in 1..max_batch
  double predicted_peak_bytes = 0;  // at best_batch
  double predicted_throughput = 0;  // samples/s at best_batch
  std::string note;                 // why max_batch is what it is, when not obvious
};

struct Advice {
  Bytes device_memory = 0;
  double headroom = 0;                // fraction of device memory kept free
  Bytes usable_bytes = 0;             // device_memory·(1 − headroom)
  std::vector<MethodAdvice> methods;  // in the order given
  std::string recommended;            // empty when no method fits
  std::string reason;                 // one line
};

struct AdvisorOptions {
  Bytes device_memory = 0;             // > 0
  double headroom = 0.10;              // 0 <= headroom < 1
  std::int64_t batch_limit = 1 << 20;  // largest batch considered
};

// `models`: method name and fitted model, in the order to report them.
Advice advise(const std::vector<std::pair<std::string, ThroughputModel>>& models, const AdvisorOptions& options);

// Fits every method in `rows` (read_measurements_csv's order) and advises.
Advice advise_from_measurements(const std::vector<Measurement>& rows, const AdvisorOptions& options);

}  // namespace memtrain::predict
