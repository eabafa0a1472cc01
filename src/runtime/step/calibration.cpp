#include "runtime/step/calibration.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "plan/schedule_builders.h"

namespace memtrain::runtime {

Calibration::Calibration(const StepPlanner& step_planner, bool measures_reference)
    : step_planner_(step_planner), measures_reference_(measures_reference) {}

Schedule Calibration::schedule(int round, int stages) const {
  MEMTRAIN_ASSERT(round >= 0 && round < rounds(), "a calibration round is one of its rounds");
  if (is_reference(round)) return plan::schedule_keeping_everything(stages);
  return step_planner_.collection_schedule(collection_of(round));
}

void Calibration::observe_reference(Bytes peak) { reference_peak_ = std::max(reference_peak_, peak); }

void Calibration::observe_collection(int round, predict::ChainSample sample) {
  MEMTRAIN_ASSERT(!is_reference(round) && collection_of(round) == static_cast<int>(samples_.size()),
                  "collection rounds are observed once each, in turn");
  samples_.push_back(std::move(sample));
}

void Calibration::widen_first(const predict::ChainSample& sample) {
  if (samples_.empty()) {
    samples_.push_back(sample);
    return;
  }
  samples_.front() = predict::larger_of(samples_.front(), sample);
}

void Calibration::teach(StepPlanner& step_planner, const Signature& at) const {
  for (const predict::ChainSample& sample : samples_) step_planner.observe_sample(at, sample);
}

}  // namespace memtrain::runtime
