// The planner flags `plan` and `train` share: --planner and the slot
// settings of the planners that discretise memory.
#pragma once

#include <string>

#include "cli/flags.h"
#include "plan/planner.h"

namespace memtrain::cli {

// "all, mimose, none, optimal, sqrt, static": for help texts.
std::string planner_list();

// `help` with the word PLANNERS replaced by planner_list().
std::string help_with_planners(const std::string& help);

// --slots N (1..100000, default 500) or --slot-bytes N (>= 1), not both.
plan::PlannerOptions parse_planner_options(Flags& flags);

}  // namespace memtrain::cli
