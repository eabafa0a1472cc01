// How much of the copies' own time compute did not wait for: the Simulator
// and the trainer report it the same way.
#pragma once

#include <algorithm>

#include "core/units.h"

namespace memtrain {

// 1 - stall / transfer; 0 when compute waited longer than the copies took,
// 1 when nothing was copied.
inline double hidden_share(Seconds stall, Seconds transfer) {
  return transfer > 0 ? std::max(0.0, 1.0 - stall / transfer) : 1.0;
}

}  // namespace memtrain
