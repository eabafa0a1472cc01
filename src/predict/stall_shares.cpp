#include "predict/stall_shares.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace memtrain::predict {

StallShares stall_shares(Seconds synthetic, Seconds cached, Seconds cold) {
  for (const auto& [name, seconds] :
       {std::pair<const char*, Seconds>{"synthetic", synthetic}, {"cached", cached}, {"cold", cold}}) {
    if (!(std::isfinite(seconds) && seconds > 0)) {
      throw Error(std::string("stall shares: the ") + name + " epoch took " + std::to_string(seconds) +
                  " s; expected a positive, finite time");
    }
  }
  const Seconds ordered_cached = std::max(cached, synthetic);
  const Seconds ordered_cold = std::max(cold, ordered_cached);
  StallShares s;
  s.prep = (ordered_cached - synthetic) / ordered_cold;
  s.fetch = (ordered_cold - ordered_cached) / ordered_cold;
  s.order_noise = (ordered_cached - cached) + (ordered_cold - cold);
  return s;
}

}  // namespace memtrain::predict
