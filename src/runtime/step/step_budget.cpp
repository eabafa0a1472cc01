#include "runtime/step/step_budget.h"

#include <utility>

#include "core/error.h"

namespace memtrain::runtime {

StepBudget::StepBudget(BudgetSpec spec, std::string needs_reference)
    : spec_(spec), needs_reference_(std::move(needs_reference)) {}

void StepBudget::set_reference(Bytes keep_everything_peak) {
  MEMTRAIN_ASSERT(keep_everything_peak > 0, "a step that keeps everything peaks above 0 bytes");
  reference_ = keep_everything_peak;
}

UsageError StepBudget::unmeasured(const BudgetSpec& spec) const {
  return UsageError("a budget of " + format_number("%g", spec.percent) +
                    "% is of the peak of a step of the largest input that keeps everything, which is not "
                    "measured yet; " +
                    needs_reference_);
}

Bytes StepBudget::bytes() const {
  if (!resolved()) throw unmeasured(spec_);
  return spec_.is_percent ? spec_.resolve(reference_) : spec_.bytes;
}

void StepBudget::respecify(const BudgetSpec& spec) {
  if (spec.is_percent && reference_ == 0) throw unmeasured(spec);
  spec_ = spec;
  granted_ = 0;
}

void StepBudget::grant(Bytes step_bytes) {
  MEMTRAIN_ASSERT(step_bytes > 0, "a step is granted a budget above 0 bytes");
  granted_ = step_bytes;
}

void StepBudget::set_reserve(Bytes reserve) {
  MEMTRAIN_ASSERT(reserve >= 0, "a planning reserve is not negative");
  reserve_ = reserve;
}

}  // namespace memtrain::runtime
