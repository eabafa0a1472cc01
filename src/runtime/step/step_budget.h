// A run's budget, the one owner of it for every trainer and front end: the
// budget asked (bytes, or N% of one reference peak), the run's budget in
// bytes, this step's (a lease's grant), and what planners plan for (the
// step's, less a reserve). The reference of N% is the peak of one step of
// the largest input that
// keeps every activation, with the weights, their gradients and the
// optimizer state on the device. A trainer measures that step where it can
// run it, and simulates it from the measured chain where it cannot (the
// weights in host memory, a shared device); an offline plan simulates it
// from the chain it is given (plan::keep_everything_peak).
#pragma once

#include <string>

#include "core/error.h"
#include "core/units.h"

namespace memtrain::runtime {

class StepBudget {
 public:
  // `needs_reference`: what a share asks of the caller before it has a
  // reference, in the error bytes() throws ("give a sample or ...").
  explicit StepBudget(BudgetSpec spec, std::string needs_reference = "measure the largest input first");

  const BudgetSpec& spec() const { return spec_; }
  bool is_share() const { return spec_.is_percent; }
  // The reference is known: a share is resolved against it.
  void set_reference(Bytes keep_everything_peak);
  Bytes reference() const { return reference_; }  // 0: not known
  bool resolved() const { return !spec_.is_percent || reference_ > 0; }
  // In bytes; UsageError for a share with no reference yet.
  Bytes bytes() const;
  // Another budget, from the next step on; a share needs the reference.
  // A grant ends with it.
  void respecify(const BudgetSpec& spec);

  // This step's budget, until the next grant: what a shared device's lease
  // granted it, below the run's budget.
  void grant(Bytes step_bytes);
  // The budget the step runs under and the guard enforces: the grant, else bytes().
  Bytes step_bytes() const { return granted_ > 0 ? granted_ : bytes(); }
  // Bytes planners leave free of every step's budget (the copies of the
  // ranks' gradient sums beside the backward).
  void set_reserve(Bytes reserve);
  Bytes reserve() const { return reserve_; }
  // The budget planners plan the step for.
  Bytes planning_bytes() const { return step_bytes() - reserve_; }

 private:
  UsageError unmeasured(const BudgetSpec& spec) const;

  BudgetSpec spec_;
  std::string needs_reference_;
  Bytes reference_ = 0;
  Bytes granted_ = 0;  // 0: no grant
  Bytes reserve_ = 0;
};

}  // namespace memtrain::runtime
