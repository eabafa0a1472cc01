// Fault injection for tests: a chain whose activation memory is scaled, so
// that plans made from it run out of budget (factor < 1) and the retry
// paths run.
#pragma once

#include "core/chain.h"

namespace memtrain {

// Multiplies every stage's activation fields (input, saved, temporaries),
// its operator variants' included, by `factor`.
void scale_activation_memory(Chain& chain, double factor);

}  // namespace memtrain
