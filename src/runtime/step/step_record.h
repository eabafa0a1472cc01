// What one step did, as every front end reports it: the Trainer (the CLI's
// models, with ranks, micro-batches and leases), BlockSteps (the Python
// module's blocks) and the GraphTrainer. A figure a front end does not
// measure keeps its default.
#pragma once

#include <cstdint>

#include "core/copy_stats.h"
#include "core/reduce_stats.h"
#include "core/schedule.h"
#include "core/signature.h"
#include "core/units.h"

namespace memtrain::runtime {

// Where a step's schedule came from.
enum class PlanKind {
  Collect,  // a collection step: measures every stage, whatever the planner
  New,      // planned for this step's size
  Cached,   // the plan cache's schedule for this size
  Retry,    // a stricter schedule after the step ran out of budget
  Frugal,   // the least-memory schedule: the caller's code after the stages is not measured at this size yet
};
const char* plan_kind_name(PlanKind kind);  // "collect", "new", "cached", "retry", "frugal"

struct StepRecord {
  std::int64_t step = 0;   // 1-based
  std::int64_t epoch = 0;  // 0-based epoch of the batch (the Trainer)
  Signature signature;     // the input's shape and size (block 0's, in Python)
  PlanKind plan = PlanKind::New;
  Schedule schedule;            // the chain's schedule run (a graph's step: empty)
  int recomputed_forwards = 0;  // forwards beyond one per stage (a graph: computations beyond one per node)
  Bytes predicted_peak_bytes =
      -1;                  // the Simulator's on the predicted chain (a graph: priced on its measured graph); -1: none
  Bytes peak_bytes = 0;    // measured, update included
  Bytes budget_bytes = 0;  // this step's: the lease when the device is shared
  bool violation = false;  // peak_bytes > budget_bytes
  int retries = 0;         // out-of-budget attempts before this one ran
  // Python's sharded blocks: the times the rest of the step was re-planned
  // after a block's forward found the step on its way past the budget.
  int replans = 0;
  // Python: device bytes of kept activations moved to host memory to make
  // room for the caller's code after the blocks (0 when the plan left it enough).
  Bytes spilled_bytes = 0;
  // A job group's device: what the step asked of the group (0: not leased),
  // and the time it waited for the grant (budget_bytes).
  Bytes lease_want_bytes = 0, lease_least_bytes = 0;
  Seconds lease_wait_seconds = 0;
  // Shared device: the Simulator's time and peak on the predicted chain keeping everything.
  Seconds predicted_plain_seconds = -1;
  Bytes predicted_plain_peak_bytes = -1;
  // The step's wall time: the Trainer's, data wait and update included;
  // Python's, from block 0's call to the end of its backward, the caller's
  // code between included; a graph's, update included, planning excluded.
  Seconds seconds = 0;
  Seconds data_wait_seconds = 0;  // waiting for the batch: the input pipeline's stall
  Seconds planning_seconds = 0;   // choosing the plan (a cache lookup, or planning a new size), retries included
  Seconds blocks_seconds =
      0;  // Python: the schedules' operations (blocks' runs, recomputations, copies), retries included
  long synchronizations = 0;  // times the step waited for the device
  double loss = 0;
  double accuracy = 0;           // fraction of counted tokens or images right
  CopyStats copies;              // what the step's copies moved and cost
  Seconds schedule_seconds = 0;  // the schedule's wall time (the update excluded)
  ReduceStats reduce;            // summing the ranks' gradients, beside the backward (none with one rank)
  Seconds predicted_reduce_stall_seconds = -1;  // the Simulator's wait for those sums; -1: none
  Seconds share_seconds = 0;                    // a sharded optimizer: sharing the updated weights
  Seconds predicted_schedule_seconds = -1;      // simulated on the predicted chain; -1: none
};

}  // namespace memtrain::runtime
