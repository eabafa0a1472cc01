// What the optimal and joint planner tests check against: every schedule of
// the persistent-chain class, built from the class's definition alone (no
// memory reasoning), and small helpers they share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/chain.h"
#include "core/schedule.h"
#include "plan/optimal_planner.h"
#include "plan/planner.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"

namespace memtrain::testing {

// Stages i..l of an n-stage chain: stage i kept whole, or a checkpoint at
// some j with i < j <= l, recursively. With `offloads`, a checkpoint whose
// x_i is stored on its own (`own`: the output of a forward without grad, not
// the batch) may also be offloaded over its forward segment, released after
// it, and prefetched before the last operation of the solve of j..l.
inline void enumerate_persistent_schedules(int i, int l, int n, std::vector<Schedule>& out, bool offloads = false,
                                           bool own = false) {
  if (i == l) {
    Schedule s;
    s.forward_all(i);
    if (i == n - 1) s.loss();
    s.backward(i);
    out.push_back(s);
    return;
  }
  std::vector<Schedule> rest;
  enumerate_persistent_schedules(i + 1, l, n, rest, offloads, false);
  for (const Schedule& r : rest) {
    Schedule s;
    s.forward_all(i);
    s.ops.insert(s.ops.end(), r.ops.begin(), r.ops.end());
    s.backward(i);
    out.push_back(s);
  }
  for (int j = i + 1; j <= l; ++j) {
    std::vector<Schedule> later, again;
    enumerate_persistent_schedules(j, l, n, later, offloads, true);
    enumerate_persistent_schedules(i, j - 1, n, again, offloads, own);
    for (const Schedule& x : later) {
      for (const Schedule& y : again) {
        for (bool offload : {false, true}) {
          if (offload && !(offloads && own && i > 0)) continue;
          Schedule s;
          if (offload) s.offload(i);
          s.forward_checkpoint(i);
          for (int k = i + 1; k < j; ++k) s.forward_none(k);
          if (offload) s.release(i);
          s.ops.insert(s.ops.end(), x.ops.begin(), x.ops.end());
          if (offload) s.ops.insert(s.ops.end() - 1, Op{OpKind::Prefetch, i});
          s.ops.insert(s.ops.end(), y.ops.begin(), y.ops.end());
          out.push_back(s);
        }
      }
    }
  }
}

inline std::vector<sim::SimResult> price_all(const Chain& c, const std::vector<Schedule>& schedules) {
  std::vector<sim::SimResult> priced;
  for (const Schedule& s : schedules) priced.push_back(sim::simulate(c, s));
  return priced;
}

// The least simulated time among `priced` whose peak fits `budget`; infinity when none does.
inline double fastest_within(const std::vector<sim::SimResult>& priced, Bytes budget) {
  double best = std::numeric_limits<double>::infinity();
  for (const sim::SimResult& r : priced) {
    if (r.peak_bytes <= budget) best = std::min(best, r.time);
  }
  return best;
}

inline Bytes keep_all_peak(const Chain& c) { return plan::keep_everything_peak(c); }

// Slots of one byte: the planners' tables are exact.
inline plan::PlannerOptions exact_slots() {
  plan::PlannerOptions o;
  o.slot_bytes = 1;
  return o;
}

// Equal up to the order of floating-point sums.
inline bool same_time(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// Plans `c` at budgets of k/12 of keeping everything, k = 1..12, and checks
// each plan against the fastest of `all` (every schedule of the planner's
// class) that fits: feasible exactly when one is, as fast, and its
// Simulator time the planner's table value. Returns the feasible plans.
inline std::vector<Plan> expect_fastest_of_class(plan::OptimalPlanner& planner, const Chain& c,
                                                 const std::vector<Schedule>& all, const std::string& where) {
  const std::vector<sim::SimResult> priced = price_all(c, all);
  const Bytes top = keep_all_peak(c);
  std::vector<Plan> plans;
  for (int k = 1; k <= 12; ++k) {
    const Bytes budget = top * k / 12;
    const double best = fastest_within(priced, budget);
    const Plan p = planner.plan({c, budget});
    EXPECT_EQ(p.feasible, best != std::numeric_limits<double>::infinity()) << where << ", budget " << budget;
    if (!p.feasible || best == std::numeric_limits<double>::infinity()) continue;
    EXPECT_TRUE(same_time(p.time, best)) << where << ": planned " << p.time << ", best " << best;
    EXPECT_TRUE(same_time(sim::simulate(c, p.schedule).time, planner.last_value())) << where;
    plans.push_back(p);
  }
  return plans;
}

}  // namespace memtrain::testing
