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
#pragma once

#include <vector>

#include "core/chain.h"
#include "core/hidden_share.h"
#include "core/schedule.h"

namespace memtrain::sim {

struct OpCost {
  Bytes peak_bytes = 0;   // memory at the peak during the operation
  Bytes after_bytes = 0;  // memory once it is done
  Seconds end_time = 0;   // compute time at which it ends, s from the step start
};

struct SimResult {
  Bytes peak_bytes = 0;          // peak over the step, optimizer update included
  Seconds time = 0;              // the step's end: compute (operations plus waits on copies) and host updates, s
  Bytes swap_bytes = 0;          // bytes copied, both directions together
  Bytes to_host_bytes = 0;       // of swap_bytes, device -> host
  Bytes to_device_bytes = 0;     // of swap_bytes, host -> device
  Bytes host_peak_bytes = 0;     // highest bytes held in host memory
  Seconds transfer_seconds = 0;  // the copies' durations, both engines together
  Seconds stall_seconds = 0;     // compute waiting on copies
  Seconds to_host_transfer_seconds = 0;  // of transfer_seconds, device -> host
  Seconds to_host_stall_seconds = 0;     // of stall_seconds, waiting on copies to host
  Bytes weight_swap_bytes = 0;           // of swap_bytes, weights and gradients (weights in host memory)
  Seconds update_seconds = 0;            // optimizer steps on the host
  // The share of copy time hidden under compute (core/hidden_share.h).
  double hidden_transfer_fraction() const { return hidden_share(stall_seconds, transfer_seconds); }
  // The same, of the copies one way: to host, or to the device.
  double hidden_fraction(bool to_host) const {
    const Seconds transfer = to_host ? to_host_transfer_seconds : transfer_seconds - to_host_transfer_seconds;
    const Seconds stall = to_host ? to_host_stall_seconds : stall_seconds - to_host_stall_seconds;
    return hidden_share(stall, transfer);
  }
  int peak_op = -1;         // index of the operation at the peak; -1 for the update
  std::vector<OpCost> ops;  // per operation, when asked for
};

SimResult simulate(const Chain& chain, const Schedule& schedule, bool per_op = false);

}  // namespace memtrain::sim
