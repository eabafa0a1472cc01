#include "runtime/training/leased_steps.h"

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
    // little yet, and a collection step cannot plan around a short lease.
    Bytes most = 0;
    const Chain largest = planner.largest_chain();
    for (int v = 0; v < planner.variant_rounds(); ++v)
      most = std::max(most, sim::simulate(largest, planner.collection_schedule(v)).peak_bytes);
    r.want = r.least = most;
    r.curve = {{most, 0}};
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
