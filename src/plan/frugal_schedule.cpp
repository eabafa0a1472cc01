#include "plan/frugal_schedule.h"

#include <algorithm>

#include "sim/simulator.h"

namespace memtrain::plan {

Bytes stricter_budget(Bytes budget, Bytes persistent, int strictness) {
  const Bytes step_down = std::max<Bytes>(1, (budget - persistent) / 8);
  return budget - strictness * step_down;
}

Schedule most_frugal_schedule(Planner& planner, const Chain& chain, const Chain* largest, Schedule fallback) {
  if (!planner.respects_budget()) return fallback;
  const Plan least = planner.plan({chain, 0, largest});
  if (least.min_budget_bytes <= 0) return fallback;
  const Plan p = planner.plan({chain, least.min_budget_bytes, largest});
  if (p.feasible && p.peak_bytes < sim::simulate(chain, fallback).peak_bytes) return p.schedule;
  return fallback;
}

}  // namespace memtrain::plan
