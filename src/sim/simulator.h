// Prices a Schedule on a Chain without running anything: its peak memory and
// its time, under the model of src/plan/MEMORY_MODEL.md. Rejects schedules
// that cannot run (core/schedule_interpreter.h, which the Executor runs
// schedules through too), naming the operation.
//
// Time runs on three timelines: compute (the forwards and backwards, one
// after the other) and one copy engine per direction (the chain's
// bandwidths). Offload(i) queues a device-to-host copy of x_i when compute
// reaches it; Release(i) makes compute wait for that copy's end, then frees
// the device bytes; Prefetch(i) allocates x_i on the device at once and
// queues the copy back; the first compute operation reading x_i waits for
// it. Copies in one direction run one at a time, in issue order.
//
// A schedule may split the step's batch into micro-batches (Op::micro): each
// has its own activations and gradient, and all the micro-batches' inputs
// are on the device from the start. With weights in host memory
// (Chain::weights_on_host) a stage computes only while its weights are on
// the device (FetchWeights .. DropWeights); its first backward allocates its
// gradients there; OffloadGrads sends them to the host, where Update runs
// the optimizer step on a fourth timeline. The step ends when compute and
// the host's updates have.
//
// One rank of a data-parallel step (Chain::reduction): AllReduce queues a
// bucket's sum on a network timeline of its own (latency per collective
// plus bytes), at most two in flight (a third waits for the first); the
// first AllReduce sets aside the chain's reserve for the sums' copies until
// the step's end, and the step ends once every sum has (compute waits).
#pragma once

#include <vector>

#include "core/chain.h"
#include "core/copy_stats.h"
#include "core/reduce_stats.h"
#include "core/schedule.h"

namespace memtrain::sim {

struct OpCost {
  Bytes peak_bytes = 0;   // memory at the peak during the operation
  Bytes after_bytes = 0;  // memory once it is done
  Seconds end_time = 0;   // compute time at which it ends, s from the step start
};

struct SimResult {
  Bytes peak_bytes = 0;        // peak over the step, optimizer update included
  Seconds time = 0;            // the step's end: compute (operations plus waits on copies) and host updates, s
  Bytes host_peak_bytes = 0;   // highest bytes held in host memory
  CopyStats copies;            // what the copies move and cost, and compute's waits on them
  Seconds update_seconds = 0;  // optimizer steps on the host
  ReduceStats reduce;          // the sums of gradients over the ranks, and compute's waits on them
  int peak_op = -1;            // index of the operation at the peak; -1 for the update
  std::vector<OpCost> ops;     // per operation, when asked for
};

SimResult simulate(const Chain& chain, const Schedule& schedule, bool per_op = false);

}  // namespace memtrain::sim
