// Capuchin's rule applied to a recompute schedule: a stored activation x_j
// that sits idle between two reads is offloaded after the first read,
// released once its copy has had time to end under the compute that follows,
// and prefetched early enough that the copy back ends before the second read,
// both judged on the Simulator's compute timeline. x_j is left alone where
// the idle gap cannot hide both copies. The result frees a_j bytes between
// Release and Prefetch, at the price of the copies that do not hide (none,
// on a single tensor; engines shared by several copies are priced by the
// Simulator afterwards).
#pragma once

#include "core/chain.h"
#include "core/schedule.h"

namespace memtrain::plan {

// `schedule` with Offload/Release/Prefetch added for every x_j whose idle gap
// hides its copies; unchanged when the chain has no host link.
Schedule with_hidden_offloads(const Chain& chain, const Schedule& schedule);

}  // namespace memtrain::plan
