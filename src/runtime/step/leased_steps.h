// A device shared with other jobs, as the Trainer sees it: one object makes
// every decision the lease brings. Calibration takes turns with the other
// jobs and runs only frugal schedules; each step asks for what its input is
// predicted to need (cached per plan bucket) and runs under what it is granted.
#pragma once

#include <cstdint>
#include <map>

#include "core/chain.h"
#include "core/units.h"
#include "runtime/step/step_lease.h"
#include "runtime/step/step_planner.h"

namespace memtrain::runtime {

class LeasedSteps {
 public:
  explicit LeasedSteps(StepLease& lease) : lease_(lease) {}

  void begin_calibration() { lease_.begin_calibration(); }
  // The group's budget, once the largest input's chain is known: its
  // simulated unconstrained peak and the planner's most frugal schedule.
  Bytes calibrated(StepPlanner& planner, const Chain& largest, Bytes reference_peak);

  // A step of `size` (a collection step: the collection schedule at the
  // largest input) asks for its lease and waits for it.
  struct Grant {
    StepLeaseRequest request;
    Bytes budget = 0;
    Seconds waited = 0;
  };
  Grant acquire(StepPlanner& planner, std::int64_t size, bool collecting);
  // The lease shrinks back after the step, however it ended.
  void settle(bool taken) noexcept;

 private:
  StepLeaseRequest request(StepPlanner& planner, std::int64_t size, bool collecting);

  StepLease& lease_;
  std::map<std::int64_t, StepLeaseRequest> requests_;  // by plan bucket
};

}  // namespace memtrain::runtime
