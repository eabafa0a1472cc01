// PAPAYA's performance model of one memory method, fitted to measurements
// at several batch sizes b:
//   peak memory   M(b) = alpha·b + beta      (never below memory_floor: the
//                                            batch-independent peak, e.g. the
//                                            optimizer update, that can set
//                                            the peak of small batches)
//   step time     t(b) = max(a, k·b) + c   (flat while the device is under-used,
//                                           then linear once it is saturated)
//   throughput    T(b) = b / t(b)           samples per second
// t(b) is a hinge: with b0 = a/k it is (a + c) + k·max(0, b − b0). For a fixed
// b0 that is linear least squares in (a + c, k), so the fit tries every
// measured batch as b0, refines between neighbours, and keeps the least
// squared relative error (b0 at or below the smallest batch is the plain
// line). The memory floor is found the same way, as a hinge in M(b).
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"
#include "predict/measurement.h"

namespace memtrain::predict {

struct ThroughputModel {
  double alpha = 0, beta = 0;  // bytes per sample, bytes
  double memory_floor = 0;     // bytes; 0 when the measurements show none
  double a = 0, k = 0, c = 0;  // seconds, seconds per sample, seconds
  double r2_memory = 0, r2_time = 0;
  int points = 0;
  std::int64_t min_batch = 0, max_batch = 0;  // range measured

  double peak_bytes(double batch) const;
  double step_seconds(double batch) const;
  double throughput(double batch) const { return batch / step_seconds(batch); }
  // Batch from which the device is saturated (step time grows linearly): a/k.
  double saturation_batch() const;
};

// Fits one method's measurements. Throws Error (naming the method and the
// reason) with fewer than 4 measurements or fewer than 2 distinct batches.
ThroughputModel fit_throughput_model(const std::vector<Measurement>& rows);

}  // namespace memtrain::predict
