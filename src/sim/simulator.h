// Prices a Schedule on a Chain without running anything: its peak memory and
// its time, under the model of src/plan/MEMORY_MODEL.md. Rejects schedules
// that the Executor could not run, naming the operation.
#pragma once

#include <vector>

#include "core/chain.h"
#include "core/schedule.h"

namespace memtrain::sim {

struct OpCost {
  Bytes peak_bytes = 0;   // memory at the peak during the operation
  Bytes after_bytes = 0;  // memory once it is done
  Seconds end_time = 0;   // time at which it ends, s from the step start
};

struct SimResult {
  Bytes peak_bytes = 0;  // peak over the step, optimizer update included
  Seconds time = 0;      // sum of the operations' times, s
  int peak_op = -1;      // index of the operation at the peak; -1 for the update
  std::vector<OpCost> ops;  // per operation, when asked for
};

SimResult simulate(const Chain& chain, const Schedule& schedule, bool per_op = false);

}  // namespace memtrain::sim
