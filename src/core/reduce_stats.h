// What a data-parallel step's sums of gradients over the ranks moved and
// cost, and how long compute waited for them. The executor measures it, the
// Simulator predicts it, the trainer records it: one type, one set of names.
#pragma once

#include <algorithm>

#include "core/units.h"

namespace memtrain {

struct ReduceStats {
  int buckets = 0;            // gradient buckets summed
  Bytes bytes = 0;            // gradient bytes summed
  Seconds seconds = 0;        // the sums' own durations, one after the other
  Seconds stall_seconds = 0;  // compute waiting on them (in flight limits, the step's end)

  // The share of the sums' time that compute did not wait for: 1 - stall /
  // sum time; 1 when nothing was summed.
  double hidden_fraction() const { return seconds > 0 ? std::max(0.0, 1.0 - stall_seconds / seconds) : 1.0; }

  ReduceStats& operator+=(const ReduceStats& other) {
    buckets += other.buckets;
    bytes += other.bytes;
    seconds += other.seconds;
    stall_seconds += other.stall_seconds;
    return *this;
  }
};

}  // namespace memtrain
