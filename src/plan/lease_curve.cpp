#include "plan/lease_curve.h"

#include <algorithm>

#include "plan/schedule_builders.h"
#include "sim/simulator.h"

namespace memtrain::plan {

LeaseCurve lease_curve(Planner& planner, const Chain& chain, const Chain* largest, const Schedule& frugal, int points) {
  LeaseCurve r;
  const sim::SimResult least = sim::simulate(chain, frugal);
  r.least = r.want = least.peak_bytes;
  if (planner.respects_budget()) {
    const Bytes everything = keep_everything_peak(chain);
    const Plan fastest = planner.plan({chain, std::max(everything, r.least), largest});
    if (fastest.feasible) r.want = std::max(fastest.peak_bytes, r.least);
  } else {
    r.least = r.want = planner.plan({chain, 0, largest}).peak_bytes;
  }
  Seconds last = least.time;
  for (int i = 0; i < points; ++i) {
    const Bytes b = r.least + (r.want - r.least) * i / std::max(points - 1, 1);
    if (!r.curve.empty() && b == r.curve.back().first) continue;
    const Plan p = planner.plan({chain, b, largest});
    if (p.feasible) last = std::min(last, p.time);
    r.curve.emplace_back(b, last);
  }
  return r;
}

}  // namespace memtrain::plan
