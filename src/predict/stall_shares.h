// DS-Analyzer measures stalls by difference: the synthetic epoch (data
// already prepared) does the least work, the cached epoch adds preprocessing,
// the cold epoch adds fetching as well. On a loaded machine the measured
// times need not come out in that order (a cached epoch can run slower than
// the cold one). The shares are taken on the ordered envelope instead:
//   synthetic' = synthetic, cached' = max(cached, synthetic'),
//   cold' = max(cold, cached'),
//   prep = (cached' - synthetic') / cold', fetch = (cold' - cached') / cold',
// so each share is in [0, 1] and they sum to at most 1 by construction; what
// the envelope had to add is reported as noise, never hidden.
#pragma once

#include "core/units.h"

namespace memtrain::predict {

struct StallShares {
  double prep = 0;          // of the (ordered) cold epoch, spent waiting on preprocessing
  double fetch = 0;         // of the (ordered) cold epoch, spent waiting on storage
  Seconds order_noise = 0;  // s the envelope added: how far the epochs ran out of order
};

// Error naming the epoch for a time that is not positive and finite.
StallShares stall_shares(Seconds synthetic, Seconds cached, Seconds cold);

}  // namespace memtrain::predict
