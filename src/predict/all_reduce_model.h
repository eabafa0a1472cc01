// The communication term of a data-parallel step: how long summing the
// gradients over N ranks takes, fitted to all-reduces measured on those
// ranks (`memtrain comm bench`):
//   seconds(bytes, tensors) = latency + per_tensor·tensors + seconds_per_byte·bytes
// The per-tensor term is there because the gradients travel as one
// all-reduce per parameter tensor, each with its own round trips.
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"

namespace memtrain::predict {

struct AllReducePoint {
  Bytes bytes = 0;           // in all the tensors together
  std::int64_t tensors = 1;  // how many all-reduces the bytes are split in
  Seconds seconds = 0;       // measured, for all of them
};

struct AllReduceModel {
  int ranks = 1;
  double latency = 0, per_tensor = 0, seconds_per_byte = 0;
  double r2 = 0;  // of the fit on its points
  int points = 0;

  Seconds seconds(double bytes, double tensors) const;
  // Bytes per second the transfer term gives one rank's gradients.
  double bandwidth() const { return seconds_per_byte > 0 ? 1 / seconds_per_byte : 0; }
};

// Least squares (on relative error, so small all-reduces count) over the
// points; a negative coefficient is dropped and the rest refitted. Error
// naming what is missing with fewer than 3 points or a single size.
AllReduceModel fit_all_reduce_model(const std::vector<AllReducePoint>& points, int ranks);

}  // namespace memtrain::predict
