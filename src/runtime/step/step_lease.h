// A trainer's side of a device shared with other jobs: before each step it
// asks for the step's budget (a lease) with what it predicts this input
// needs, and after the step the lease shrinks to what the trainer keeps.
// Calibration takes turns with the other jobs and publishes what it found.
#pragma once

#include <vector>

#include "core/units.h"
#include "plan/lease_curve.h"

namespace memtrain::runtime {

// What the planner predicts for this step's input (plan::lease_curve).
using StepLeaseRequest = plan::LeaseCurve;

class StepLease {
 public:
  virtual ~StepLease() = default;
  virtual void begin_calibration() = 0;  // waits for this job's turn
  // Ends the turn with the largest input's unconstrained peak, least budget
  // and stored tensors whose swaps hide under its compute (largest first);
  // waits for the group to start and returns its whole budget.
  virtual Bytes calibrated(Bytes reference, Bytes least_largest, const std::vector<Bytes>& swappable) = 0;
  // Blocks until granted; the step's budget, at least request.least.
  virtual Bytes acquire(const StepLeaseRequest& request, Seconds* waited) = 0;
  virtual void settle(bool step_taken) = 0;
};

}  // namespace memtrain::runtime
