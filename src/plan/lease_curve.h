// What a job on a shared device asks for before a step: the least budget its
// planner can work with for this input, what its fastest plan needs, and the
// step's predicted time at budgets between the two, where a lease policy sees
// what memory buys the job.
#pragma once

#include <utility>
#include <vector>

#include "core/chain.h"
#include "core/schedule.h"
#include "plan/planner.h"

namespace memtrain::plan {

struct LeaseCurve {
  Bytes want = 0;   // the peak of the planner's fastest plan, at least `least`
  Bytes least = 0;  // the peak of its most frugal schedule
  // Predicted time at budgets from `least` to `want`, ascending bytes.
  std::vector<std::pair<Bytes, Seconds>> curve;
};

// `frugal`: the planner's most frugal schedule for `chain`
// (most_frugal_schedule). A planner that ignores budgets asks for its
// plan's peak, least and want alike. The curve has at most `points` points
// and never rises: a larger budget can always run a smaller one's schedule
// (a planner's times for two equally good schedules may differ in their
// last bits).
LeaseCurve lease_curve(Planner& planner, const Chain& chain, const Chain* largest, const Schedule& frugal, int points);

}  // namespace memtrain::plan
