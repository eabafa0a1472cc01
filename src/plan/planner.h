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

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  // False for planners that ignore the budget (`none`): the trainer then
  // runs them without enforcing it and counts violations instead.
  virtual bool respects_budget() const { return true; }
  // True for planners that choose operator variants (`joint`): the trainer
  // then measures every variant while it collects.
  virtual bool uses_variants() const { return false; }
  // True for planners that only plan weights in host memory (`swap-naive`).
  virtual bool needs_weights_on_host() const { return false; }
  // True for planners that can plan weights in host memory (their schedules
  // fetch and drop weights): `swap` and `swap-naive`.
  virtual bool plans_weights_on_host() const { return needs_weights_on_host(); }
  // True for planners whose schedules may move tensors over the host link
  // (offloads, swaps), which they plan with its bandwidth: without one they
  // plan no copies. Front ends measure the link for them when none is given.
  virtual bool uses_host_link() const { return plans_weights_on_host(); }
  // True for planners whose schedules recompute a stage only right before
  // its own backward (PlannerOptions::local_recompute).
  virtual bool recomputes_locally() const { return false; }
  virtual Plan plan(const PlanRequest& request) = 0;
};

}  // namespace memtrain::plan
