// Capuchin's rule applied to a recompute schedule, for two kinds of stored
// activation:
// - a checkpoint x_j that sits idle between two reads is offloaded after the
//   first read (Offload/Release/Prefetch);
// - what a forward with grad F_all(i) keeps beyond its output, idle until
//   B(i), is offloaded right after the forward (OffloadSaved/ReleaseSaved/
//   PrefetchSaved).
// Each copy to host is queued on the device-to-host engine in the order the
// schedule makes them, and its release goes before the first operation that
// starts once the copy has ended; each copy back is placed, latest read
// first, as late as the host-to-device engine allows while still ending
// before its read. All of it is judged on the Simulator's compute timeline
// of the schedule as given, so every copy kept hides and compute never waits;
// a tensor whose copies cannot both hide in its idle gap stays on the device.
#pragma once

#include "core/chain.h"
#include "core/schedule.h"

namespace memtrain::plan {

// `schedule` with the copies above added for every stored activation whose
// idle gap hides them; unchanged when the chain has no host link.
Schedule with_hidden_offloads(const Chain& chain, const Schedule& schedule);

// Whether `op` is one of the copy operations (offload, release, prefetch) of
// the tensor that `offload` (an Offload or OffloadSaved) starts moving: x_j,
// or what F_all(j) kept.
bool moves_tensor_of(const Op& op, const Op& offload);

// `schedule` without the offloads (each tensor's three copy operations) that
// `budget` does not need: latest offload first, each is dropped when the
// Simulator finds the step no slower and still within `budget`. Bytes that
// need not move should not take the link from the ones that must.
Schedule without_needless_offloads(const Chain& chain, const Schedule& schedule, Bytes budget);

}  // namespace memtrain::plan
