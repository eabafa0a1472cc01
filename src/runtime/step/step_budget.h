// A run's budget: bytes, or N% of one reference peak, the same for every
// trainer and front end: the peak of one step of the largest input that
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
  void respecify(const BudgetSpec& spec);

 private:
  UsageError unmeasured(const BudgetSpec& spec) const;

  BudgetSpec spec_;
  std::string needs_reference_;
  Bytes reference_ = 0;
};

}  // namespace memtrain::runtime
