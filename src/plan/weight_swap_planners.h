// Planners for weights in host memory (Chain::weights_on_host), over
// PlannerOptions::micro_batches micro-batches:
// - GroupedSwapPlanner (Harmony; `swap` uses it for such chains) tries every
//   number of layer packs, each cut as evenly by weight as a greedy cut
//   makes it, with and without fetching the next pack ahead, and with and
//   without offloading the packs' inputs between a micro-batch's forward
//   and its backward, and keeps the fastest schedule the Simulator says fits
//   the budget;
// - PerLayerSwapPlanner (`swap-naive`) is the baseline it is measured
//   against: per stage, per micro-batch (weight_swap_schedules.h).
#pragma once

#include "plan/planner.h"

namespace memtrain::plan {

class GroupedSwapPlanner : public Planner {
 public:
  explicit GroupedSwapPlanner(PlannerOptions options = {}) : options_(options) {}
  std::string name() const override { return "swap"; }
  static constexpr PlannerTraits kTraits{.plans_weights_on_host = true, .uses_host_link = true};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;

 private:
  PlannerOptions options_;
};

class PerLayerSwapPlanner : public Planner {
 public:
  explicit PerLayerSwapPlanner(PlannerOptions options = {}) : options_(options) {}
  std::string name() const override { return "swap-naive"; }
  static constexpr PlannerTraits kTraits{
      .needs_weights_on_host = true, .plans_weights_on_host = true, .uses_host_link = true};
  const PlannerTraits& traits() const override { return kTraits; }
  Plan plan(const PlanRequest& request) override;

 private:
  PlannerOptions options_;
};

}  // namespace memtrain::plan
