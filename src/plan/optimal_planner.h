// `optimal`: the least simulated time any persistent-chain schedule can have
// for this input within the budget (PersistentDp), or the least budget at
// which one exists. Budget-aware and input-aware: it plans whatever chain it
// is given, so in the trainer it plans each predicted input size.
// `joint`: the same, choosing each kept stage's variant (Stage::variants)
// together with the schedule; on a chain without variants it is `optimal`.
// With offloads: the same class with checkpoints that may go to host memory
// and back (PersistentDp), priced on the chain's copy engines; `swap` takes
// it as a candidate.
#pragma once

#include <cstdint>

#include "plan/persistent_dp.h"
#include "plan/planner.h"

namespace memtrain::plan {

class OptimalPlanner : public Planner {
 public:
  explicit OptimalPlanner(PlannerOptions options = {}, bool variants = false, bool offloads = false)
      : options_(options), variants_(variants), offloads_(offloads) {
    dp_.set_local_recompute(options.local_recompute);
  }
  std::string name() const override { return variants_ ? "joint" : offloads_ ? "optimal-offload" : "optimal"; }
  static constexpr PlannerTraits kOptimalTraits{.local_recompute = PlannerTraits::LocalRecompute::WhenAsked};
  static constexpr PlannerTraits kJointTraits{.uses_variants = true,
                                              .local_recompute = PlannerTraits::LocalRecompute::WhenAsked};
  static constexpr PlannerTraits kOffloadTraits{.uses_host_link = true,
                                                .local_recompute = PlannerTraits::LocalRecompute::WhenAsked};
  const PlannerTraits& traits() const override {
    return variants_ ? kJointTraits : offloads_ ? kOffloadTraits : kOptimalTraits;
  }
  bool recomputes_locally() const override { return traits().recomputes_locally(options_); }
  Plan plan(const PlanRequest& request) override;

  // The table of the last plan, and its value: the DP's own time for the
  // schedule it returned, which the Simulator must reproduce.
  const PersistentDp& table() const { return dp_; }
  double last_value() const { return last_value_; }

 private:
  Bytes slot_size(Bytes available) const;
  Schedule keeping_everything_fastest(const Chain& chain) const;

  PlannerOptions options_;
  bool variants_;
  bool offloads_;    // needs the chain's host link; without one the table has none
  PersistentDp dp_;  // kept between plans: its buffers are reused
  double last_value_ = PersistentDp::kInfinity;
};

}  // namespace memtrain::plan
