#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "plan/mimose_planner.h"
#include "plan/schedule_builders.h"
#include "plan/sqrt_planner.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/execution/chain_measurement.h"
#include "runtime/execution/executor.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/enforcement_scope.h"
#include "runtime/model/staged_model.h"
#include "sim/simulator.h"
#include "support/rig.h"

namespace memtrain::runtime {
namespace {

using testing::Rig;

// A schedule of the kind `optimal` emits, with nested recomputation: stages
// 0 and 2 run forward three times each.
Schedule nested_schedule() {
  Schedule s;
  s.forward_checkpoint(0);
  s.forward_none(1);
  s.forward_checkpoint(2);
  s.forward_none(3);
  s.forward_all(4);
  s.forward_all(5);
  s.loss();
  s.backward(5);
  s.backward(4);
  s.forward_checkpoint(2);
  s.forward_all(3);
  s.backward(3);
  s.forward_all(2);
  s.backward(2);
  s.forward_checkpoint(0);
  s.forward_all(1);
  s.backward(1);
  s.forward_all(0);
  s.backward(0);
  return s;
}

std::vector<Schedule> schedules_for(int n) {
  return {nested_schedule(),
          plan::schedule_with_recompute(std::vector<char>(n, 0)),
          plan::schedule_with_recompute(std::vector<char>(n, 1)),
          plan::schedule_with_segments(n, plan::SqrtPlanner::segment_starts(n)),
          plan::schedule_for_collection(n),
          plan::schedule_with_recompute({1, 0, 1, 1, 0, 0})};
}

// The heart of "the Simulator says it fits and the Executor agrees": the
// chain measured once predicts the peak of every other schedule.
TEST(Executor, MeasuredPeaksAgreeWithTheSimulator) {
  Rig rig;
  const int n = rig.model->size();
  ASSERT_EQ(n, 6);
  for (int b = 0; b < 3; ++b) {
    const Batch batch = rig.batch(b);
    const RngSnapshot start = RngSnapshot::capture(rig.generator);
    const ExecutionResult measured = rig.run(plan::schedule_for_collection(n), batch);
    rig.adam->zero_grad();
    const Chain chain = chain_from_sample(sample_execution(measured, n, rig.adam->update_temp_bytes()),
                                          stage_constants(*rig.model, Adam::kSlots));
    for (const Schedule& s : schedules_for(n)) {
      start.restore(rig.generator);
      const ExecutionResult r = rig.run(s, batch);
      rig.adam->zero_grad();
      const sim::SimResult predicted = sim::simulate(chain, s, true);
      // Peak over the schedule's operations (the update is not run here).
      Bytes simulated = 0;
      for (const auto& op : predicted.ops) simulated = std::max(simulated, op.peak_bytes);
      const double error = std::abs(static_cast<double>(simulated - r.peak)) / static_cast<double>(r.peak);
      EXPECT_LT(error, 0.01) << s.to_string() << " simulated " << simulated << " measured " << r.peak;
      EXPECT_GE(simulated, r.peak) << "the model may overestimate, never underestimate: " << s.to_string();
    }
  }
}

TEST(Executor, CheckpointedStepsComputeExactlyWhatAPlainStepDoes) {
  const int n = 6;
  Rig plain;
  const Batch b = plain.batch(1);
  const ExecutionResult reference = plain.run(plan::schedule_with_recompute(std::vector<char>(n, 0)), b);
  for (const Schedule& s : schedules_for(n)) {
    Rig rig;  // same seed: same weights, same generator
    const ExecutionResult r = rig.run(s, rig.batch(1));
    testing::expect_same_step(plain, reference, rig, r, s.to_string());
    // The generator ends where the plain step left it: recomputation replays, it does not draw.
    EXPECT_TRUE(torch::equal(torch::empty({8}).bernoulli_(0.5, rig.generator),
                             torch::empty({8}).bernoulli_(0.5, plain.generator.clone())))
        << s.to_string();
  }
}

TEST(Executor, DropoutIsActiveSoTheExactnessTestMeansSomething) {
  Rig a(0.3);
  const Batch batch = a.batch(0);
  const ExecutionResult first = a.run(plan::schedule_with_recompute(std::vector<char>(6, 0)), batch);
  a.adam->zero_grad();
  const ExecutionResult second = a.run(plan::schedule_with_recompute(std::vector<char>(6, 0)), batch);
  EXPECT_NE(first.loss, second.loss) << "the second step draws new masks";
}

TEST(Executor, RefusesASchedulePastItsState) {
  Rig rig;
  Schedule s;
  s.backward(0);
  EXPECT_THROW(rig.run(s, rig.batch()), Error);
}

TEST(Executor, RecordsEveryOperation) {
  Rig rig;
  const Schedule s = plan::schedule_for_collection(6);
  const ExecutionResult r = rig.run(s, rig.batch());
  ASSERT_EQ(r.ops.size(), s.ops.size());
  for (size_t k = 0; k < r.ops.size(); ++k) {
    EXPECT_EQ(r.ops[k].op, s.ops[k]);
    EXPECT_GE(r.ops[k].peak, r.ops[k].live_before);
    EXPECT_GE(r.ops[k].peak, r.ops[k].live_after);
    EXPECT_GE(r.ops[k].seconds, 0);
  }
  EXPECT_GT(r.loss, 0);
}

// Doubling needs nothing of its output for its backward: the executor lets
// the output go before the backward, so the backward's peak holds the input
// gradient it makes instead of the output beside it.
TEST(Executor, AStageOutputNothingSavedIsNotHeldThroughItsBackward) {
  using torch::nn::AnyModule;
  CpuDeviceMemory memory;
  auto scope = memory.activate();
  torch::manual_seed(0);
  const AnyModule doubling(torch::nn::Functional([](torch::Tensor x) { return x * 2; }));
  StagedModel model = StagedModel::from_modules("doubling", {AnyModule(torch::nn::Linear(8, 4096)), doubling},
                                                AnyModule(torch::nn::Linear(4096, 3)));
  Batch b;
  b.input = torch::randn({16, 8});
  b.targets = torch::randint(0, 3, {16});
  b.signature = Signature::of_shape({16, 8});
  StepContext ctx;
  ctx.targets = b.targets;
  EXPECT_THROW(Executor(model, memory).run(plan::schedule_for_collection(model.size()), b, ctx), Error);
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  const ExecutionResult r = Executor(model, memory).run(plan::schedule_for_collection(model.size()), b, ctx);
  const Bytes activation = 16 * 4096 * 4;
  bool found = false;
  for (const OpRecord& rec : r.ops) {
    if (rec.op.kind != OpKind::Backward || rec.op.stage != 1) continue;
    found = true;
    // live_before holds the output; making the input gradient (one more
    // activation) would raise the peak by it, were the output still there.
    EXPECT_LT(rec.peak, rec.live_before + activation / 2);
  }
  EXPECT_TRUE(found);
}

// A backward that runs out of budget inside a bottleneck block leaves
// autograd's queued work for the block's other branch (the gradients it was
// given, the tensors its nodes saved) behind on this thread. The attempt
// must give every byte back, or the attempts after it run out where they fit.
TEST(Executor, AStepThatRanOutInItsBackwardGivesEveryByteBack) {
  CpuDeviceMemory memory;
  auto scope = memory.activate();
  torch::manual_seed(0);
  ModelSpec spec;
  spec.width = 4;
  StagedModel model = make_model("resnet50", spec, {0, 10, 0, 1});
  Batch b;
  b.input = torch::randn({4, 1, 64, 64});
  b.targets = torch::randint(0, 10, {4});
  b.signature = Signature::of_shape({4, 1, 64, 64});
  b.examples = 4;
  auto run = [&] {
    StepContext ctx;
    ctx.targets = b.targets;
    ctx.training = true;
    ctx.generator = at::make_generator<at::CPUGeneratorImpl>(1);
    return Executor(model, memory).run(plan::schedule_keeping_everything(model.size()), b, ctx);
  };
  auto drop_gradients = [&] {
    for (torch::Tensor& p : model.parameters()) p.mutable_grad() = torch::Tensor();
  };
  const Bytes before = memory.live();
  const ExecutionResult plain = run();
  drop_gradients();
  ASSERT_EQ(memory.live(), before);
  // Run out just below each backward's peak: somewhere inside it.
  std::set<Bytes> budgets;
  for (const OpRecord& rec : plain.ops)
    if (rec.op.kind == OpKind::Backward) budgets.insert(rec.peak - 1);
  ASSERT_GT(budgets.size(), 10u);
  {
    EnforcementScope enforced(memory, true);
    for (const Bytes budget : budgets) {
      memory.set_budget(budget);
      EXPECT_THROW(run(), OutOfBudget) << budget;
      drop_gradients();
      EXPECT_EQ(memory.live(), before) << "after running out at " << budget << " bytes";
    }
  }
  memory.set_budget(-1);
}

}  // namespace
}  // namespace memtrain::runtime
