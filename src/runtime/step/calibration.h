// Calibration: the rounds every front end runs on its largest input before
// its first step, measuring rather than training. Which rounds there are,
// what each runs and what each learns are the engine's; how a round is run
// and rolled back is the front end's (the Trainer runs its own executor,
// BlockSteps runs around the caller's code).
#pragma once

#include <vector>

#include "core/schedule.h"
#include "core/signature.h"
#include "core/units.h"
#include "predict/chain_predictor.h"
#include "runtime/step/step_planner.h"

namespace memtrain::runtime {

class Calibration {
 public:
  // The rounds: the plain step first, where `measures_reference` (N%'s
  // reference is of it), then one collection round per variant `step_planner`
  // chooses among (StepPlanner::variant_rounds()).
  Calibration(const StepPlanner& step_planner, bool measures_reference);

  int rounds() const { return (measures_reference_ ? 1 : 0) + step_planner_.variant_rounds(); }
  bool is_reference(int round) const { return measures_reference_ && round == 0; }
  // The schedule round `round` runs over `stages` stages.
  Schedule schedule(int round, int stages) const;
  // Variants are chosen by their times: a front end that can measures each
  // collection twice and keeps the faster (faster_of), since one-off costs
  // and a busy machine would bias the choice.
  bool times_twice() const { return step_planner_.planner().uses_variants(); }

  // What round `round` measured: the plain step's peak (the most seen is
  // kept), or a collection's sample.
  void observe_reference(Bytes peak);
  void observe_collection(int round, predict::ChainSample sample);
  // The same input measured again in another precision (Python's autocast
  // round): the blocks hold what its steps will, where that is more.
  void widen_first(const predict::ChainSample& sample);

  Bytes reference_peak() const { return reference_peak_; }
  const std::vector<predict::ChainSample>& samples() const { return samples_; }
  // Hands what the rounds learnt to `step_planner`'s predictor, at input `at`.
  void teach(StepPlanner& step_planner, const Signature& at) const;

 private:
  // The collection round `round` is (0.. in the planner's numbering).
  int collection_of(int round) const { return round - (measures_reference_ ? 1 : 0); }

  const StepPlanner& step_planner_;
  bool measures_reference_;
  Bytes reference_peak_ = 0;
  std::vector<predict::ChainSample> samples_;  // one per collection round observed
};

}  // namespace memtrain::runtime
