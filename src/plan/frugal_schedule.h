// What a trainer falls back on when a plan ran out of budget or none fits
// the prediction: a budget lowered step by step, and the schedule with the
// lowest predicted peak a planner can give.
#pragma once

#include "core/chain.h"
#include "core/schedule.h"
#include "core/units.h"
#include "plan/planner.h"

namespace memtrain::plan {

// The budget to plan against after `strictness` failed plans for an input,
// the one retry ladder of chains and graphs: each lowers `budget` by an
// eighth of what it leaves the activations above `persistent` bytes.
Bytes stricter_budget(Bytes budget, Bytes persistent, int strictness);

// The planner's own schedule at the least budget it can work with, when
// its simulated peak on `chain` is below `fallback`'s; `fallback` otherwise
// (and for planners that ignore budgets).
Schedule most_frugal_schedule(Planner& planner, const Chain& chain, const Chain* largest, Schedule fallback);

}  // namespace memtrain::plan
