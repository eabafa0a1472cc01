#include "runtime/step/leased_steps.h"

#include <algorithm>

#include "plan/frugal_schedule.h"
#include "plan/lease_curve.h"
#include "plan/tensile_planner.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

Bytes LeasedSteps::calibrated(StepPlanner& planner, const Chain& largest, Bytes reference_peak) {
  const Schedule frugal = plan::most_frugal_schedule(planner.planner(), largest, &largest, planner.fallback_schedule());
  return lease_.calibrated(reference_peak, sim::simulate(largest, frugal).peak_bytes,
                           plan::swappable_tensor_bytes(largest));
}

StepLeaseRequest LeasedSteps::request(StepPlanner& planner, std::int64_t size, bool collecting) {
  StepLeaseRequest r;
  if (collecting) {
    // The collection schedule at the largest input: the predictor knows
    // little yet. Granted less, down to the least the group was told of
    // (the most frugal schedule's there), the step runs out of its lease
    // and runs again under a plan, as a step over its own budget does:
    // priced at both runs' time.
    const Chain largest = planner.largest_chain();
    sim::SimResult collect;
    for (int v = 0; v < planner.variant_rounds(); ++v) {
      sim::SimResult round = sim::simulate(largest, planner.collection_schedule(v));
      if (round.peak_bytes > collect.peak_bytes) collect = round;
    }
    const sim::SimResult frugal = sim::simulate(largest, planner.most_frugal_at_largest());
    r.want = collect.peak_bytes;
    r.least = std::min(collect.peak_bytes, frugal.peak_bytes);
    r.curve = {{r.want, collect.time}};
    if (r.least < r.want) r.curve.insert(r.curve.begin(), {r.least, collect.time + frugal.time});
    return r;
  }
  const std::int64_t bucket = planner.bucket_of(size);
  if (const auto hit = requests_.find(bucket); hit != requests_.end()) return hit->second;
  constexpr int kPoints = 6;  // budgets the step is priced at
  const Chain largest = planner.largest_chain();
  r = plan::lease_curve(planner.planner(), planner.planning_chain(size), &largest, planner.most_frugal(size), kPoints);
  requests_[bucket] = r;
  return r;
}

LeasedSteps::Grant LeasedSteps::acquire(StepPlanner& planner, std::int64_t size, bool collecting) {
  Grant g;
  g.request = request(planner, size, collecting);
  g.budget = lease_.acquire(g.request, &g.waited);
  return g;
}

void LeasedSteps::settle(bool taken) noexcept {
  try {
    lease_.settle(taken);
  } catch (const std::exception&) {
  }
}

}  // namespace memtrain::runtime
