#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "plan/registry.h"
#include "plan/weight_swap_planners.h"
#include "plan/weight_swap_schedules.h"
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
    EXPECT_LT(gs.copies.weight_bytes, ps.copies.weight_bytes) << "seed " << seed;
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

TEST(WeightSwapPlanners, OnlySwapAndSwapNaivePlanWeightsInHostMemory) {
  std::vector<std::string> able;
  for (const std::string& name : planner_names()) {
    if (make_planner(name)->plans_weights_on_host()) able.push_back(name);
  }
  EXPECT_EQ(able, (std::vector<std::string>{"swap", "swap-naive"}));
}

// The trainer's collection schedule with weights in host memory: every stage
// forward without grad and then with grad, one stage's weights at a time,
// so it needs no more than the per-stage baseline (but for the loss each
// micro-batch's forward without grad keeps) and measures every field.
TEST(WeightSwapPlanners, TheCollectionScheduleRunsEveryStageBothWaysOneStageAtATime) {
  for (std::uint32_t seed = 1; seed <= 10; ++seed) {
    const Chain c = weight_heavy_chain(2 + seed % 6, seed);
    const int n = c.size();
    const Schedule collect = weight_swap_collection_schedule(n, 3);
    EXPECT_EQ(collect.micro_batches(), 3);
    const sim::SimResult r = sim::simulate(c, collect);  // throws if it breaks a rule of the weight operations
    const sim::SimResult baseline = sim::simulate(c, per_layer_swap_schedule(n, 3, false));
    EXPECT_LE(r.peak_bytes, baseline.peak_bytes + 3 * c.output_bytes) << "seed " << seed;
    for (int m = 0; m < 3; ++m) {
      for (int i = 0; i < n; ++i) {
        int checkpointed = 0, kept = 0;
        for (const Op& op : collect.ops) {
          if (op.stage != i || op.micro != m) continue;
          checkpointed += op.kind == OpKind::ForwardCheckpoint;
          kept += op.kind == OpKind::ForwardAll;
        }
        EXPECT_EQ(checkpointed, 1) << "stage " << i << " micro-batch " << m;
        EXPECT_EQ(kept, 1) << "stage " << i << " micro-batch " << m;
      }
    }
  }
}

}  // namespace
}  // namespace memtrain::plan
