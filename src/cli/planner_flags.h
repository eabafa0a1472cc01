// The planner flags `plan` and `train` share: --planner and the slot
// settings of the planners that discretise memory.
#pragma once

#include <string>

#include "cli/flags.h"
#include "core/chain.h"
#include "plan/planner.h"

namespace memtrain::cli {

// "all, joint, mimose, ...": every registered planner, for help texts.
std::string planner_list();

// `help` with the word PLANNERS replaced by planner_list().
std::string help_with_planners(const std::string& help);

// --slots N (1..100000, default 500) or --slot-bytes N (>= 1), not both.
plan::PlannerOptions parse_planner_options(Flags& flags);

// The host link's bandwidths from --bandwidth BW (both directions) or
// --d2h-bandwidth / --h2d-bandwidth; 0 where not given.
struct LinkFlags {
  double device_to_host = 0;  // bytes/s
  double host_to_device = 0;  // bytes/s
  // Sets the chain's bandwidths where a flag gave one.
  void apply(Chain& chain) const;
  bool given() const { return device_to_host > 0 || host_to_device > 0; }
};
LinkFlags parse_link_flags(Flags& flags);

// Where weights live, --weights-on device|host (default device), and
// --micro-batches N (default 1). Split steps with the weights on the device
// are plain gradient accumulation, which `train` runs (accumulate_on_device)
// and the Simulator does not price: there they need --weights-on host.
struct WeightFlags {
  bool on_host = false;
  int micro_batches = 1;
};
WeightFlags parse_weight_flags(Flags& flags, bool accumulate_on_device = false);

}  // namespace memtrain::cli
