// Turns any planner's schedule into one rank's schedule of a data-parallel
// step: each gradient bucket's AllReduce goes right after the last backward
// of its lowest stage, the earliest point its gradients are final, so its
// sum travels while the backwards of the stages below it compute. What the
// planner chose to keep, recompute or offload stays as it is.
#pragma once

#include <vector>

#include "core/schedule.h"

namespace memtrain::plan {

// `first_stages`: the buckets' lowest stages, highest bucket first
// (core/gradient_reduction.h). The schedule must run every backward.
Schedule with_gradient_sums(const Schedule& schedule, const std::vector<int>& first_stages);

// The same with every sum after the whole schedule: nothing overlaps, but
// the sums' copies need no room beside the backward's activations.
Schedule with_gradient_sums_at_end(const Schedule& schedule, const std::vector<int>& first_stages);

}  // namespace memtrain::plan
