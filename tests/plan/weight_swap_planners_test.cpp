#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "plan/weight_swap_planners.h"
#include "sim/simulator.h"

namespace memtrain::plan {
namespace {

// A chain whose weights dominate its activations, in host memory.
Chain weight_heavy_chain(int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<Bytes> weights(1000, 5000), activations(10, 100);
  std::uniform_real_distribution<double> seconds(0.001, 0.01);
  Chain c;
  for (int i = 0; i < n; ++i) {
    Stage s;
    s.forward_time = seconds(rng);
    s.backward_time = 2 * s.forward_time;
    s.input_bytes = activations(rng);
    s.saved_bytes = 3 * s.input_bytes;
    s.param_bytes = weights(rng);
    s.grad_bytes = s.param_bytes;
    s.state_bytes = 3 * s.param_bytes;
    s.update_time = 0.001;
    c.stages.push_back(s);
  }
  c.output_bytes = 4;
  c.weights_on_host = true;
  c.device_to_host_bandwidth = c.host_to_device_bandwidth = 1e6;
  return c;
}

TEST(WeightSwapPlanners, FitTheBudgetAndGroupingMovesLessAndIsFaster) {
  // Grouping pays off across micro-batches; with one, per-layer swapping can
  // be as fast, and at a budget within bytes of one stage's weights only it
  // may fit (grouping keeps every micro-batch's pack inputs).
  int compared = 0, grouped_infeasible = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const Chain c = weight_heavy_chain(2 + seed % 10, seed);
    PlannerOptions o;
    o.micro_batches = 4;
    GroupedSwapPlanner grouped(o);
    PerLayerSwapPlanner per_layer(o);
    const Bytes budget = c.model_state_bytes() / 4;
    const Plan g = grouped.plan({c, budget});
    const Plan p = per_layer.plan({c, budget});
    if (!p.feasible) continue;
    if (!g.feasible) {
      ++grouped_infeasible;
      continue;
    }
    ++compared;
    const sim::SimResult gs = sim::simulate(c, g.schedule), ps = sim::simulate(c, p.schedule);
    EXPECT_LE(gs.peak_bytes, budget);
    EXPECT_EQ(g.schedule.micro_batches(), 4);
    EXPECT_LT(gs.weight_swap_bytes, ps.weight_swap_bytes) << "seed " << seed;
    EXPECT_LT(g.time, p.time) << "seed " << seed;
  }
  EXPECT_GE(compared, 30);
  EXPECT_LE(grouped_infeasible, 4);
}

TEST(WeightSwapPlanners, ABudgetBelowOneStageIsInfeasibleWithTheLeastNeeded) {
  const Chain c = weight_heavy_chain(4, 7);
  GroupedSwapPlanner grouped;
  const Plan g = grouped.plan({c, 100});
  EXPECT_FALSE(g.feasible);
  EXPECT_GT(g.min_budget_bytes, 100);
  const Plan at_least = grouped.plan({c, g.min_budget_bytes});
  EXPECT_TRUE(at_least.feasible) << "the least budget reported is enough";
}

TEST(WeightSwapPlanners, NeedWeightsInHostMemory) {
  Chain c = weight_heavy_chain(3, 1);
  c.weights_on_host = false;
  PerLayerSwapPlanner per_layer;
  EXPECT_TRUE(per_layer.needs_weights_on_host());
  EXPECT_THROW(per_layer.plan({c, 1 << 30}), UsageError);
}

}  // namespace
}  // namespace memtrain::plan
