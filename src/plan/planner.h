// A planner turns a chain's cost model and a budget into a Schedule, or says
// it cannot, with the least budget it would need. Planners are chosen by name
// (registry.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/chain.h"
#include "core/plan.h"

namespace memtrain::plan {

struct PlanRequest {
  const Chain& chain;              // cost model for this input
  Bytes budget;                    // bytes for the whole step, persistent memory included
  const Chain* largest = nullptr;  // cost model of the dataset's largest input, if known
};

// Settings of the planners that discretise memory (`optimal`, `joint`) and
// of those that swap weights.
struct PlannerOptions {
  std::int64_t slots = 500;  // memory above the resident bytes is cut into this many slots
  Bytes slot_bytes = 0;      // or into slots of exactly this size when > 0 (1: exact)
  // Micro-batches a step is split into (weight-swapping planners); the chain
  // they plan on is one micro-batch's.
  int micro_batches = 1;
  // Recompute a stage only just before its own backward, never on the way
  // to a later one's: for stages whose weights are present only around
  // their own runs (blocks sharded by FSDP2, gathered by their hooks).
  bool local_recompute = false;
};

// What a planner can do, as data: the registry answers it for a planner's
// name without building one (registry.h), and each planner's traits()
// return the same constant.
struct PlannerTraits {
  // Whether its schedules recompute a stage only right before the stage's
  // own backward (PlannerOptions::local_recompute): never, always (each
  // stage on its own), or where the options ask it.
  enum class LocalRecompute { Never, Always, WhenAsked };

  // False for planners that ignore the budget (`none`): the trainer then
  // runs them without enforcing it and counts violations instead.
  bool respects_budget = true;
  // True for planners that choose operator variants (`joint`): the trainer
  // then measures every variant while it collects.
  bool uses_variants = false;
  // True for planners that only plan weights in host memory (`swap-naive`).
  bool needs_weights_on_host = false;
  // True for planners that can plan weights in host memory (their schedules
  // fetch and drop weights): `swap` and `swap-naive`.
  bool plans_weights_on_host = false;
  // True for planners whose schedules may move tensors over the host link
  // (offloads, swaps), which they plan with its bandwidth: without one they
  // plan no copies. Front ends measure the link for them when none is given.
  bool uses_host_link = false;
  LocalRecompute local_recompute = LocalRecompute::Never;

  bool recomputes_locally(const PlannerOptions& options) const {
    return local_recompute == LocalRecompute::Always ||
           (local_recompute == LocalRecompute::WhenAsked && options.local_recompute);
  }
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  virtual const PlannerTraits& traits() const = 0;
  virtual Plan plan(const PlanRequest& request) = 0;

  bool respects_budget() const { return traits().respects_budget; }
  bool uses_variants() const { return traits().uses_variants; }
  bool needs_weights_on_host() const { return traits().needs_weights_on_host; }
  bool plans_weights_on_host() const { return traits().plans_weights_on_host; }
  bool uses_host_link() const { return traits().uses_host_link; }
  // With the options it was made with, where they decide.
  virtual bool recomputes_locally() const { return traits().recomputes_locally(PlannerOptions{}); }
};

}  // namespace memtrain::plan
