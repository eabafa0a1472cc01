// The U-Net trained by graph schedules: the Checkmate planner's choice of
// what to keep and recompute, executed for real on Fashion-MNIST.
#include <gtest/gtest.h>

#include <functional>

#include <torch/torch.h>

#include "core/error.h"
#include "plan/checkmate_planner.h"
#include "runtime/builtin_models/unet.h"
#include "runtime/execution/graph_executor.h"
#include "runtime/input/fashion_mnist_batches.h"
#include "support/fashion_mnist_images.h"
#include "support/small_unet.h"

namespace memtrain::runtime {
namespace {

struct UNetRig {
  CpuDeviceMemory memory;
  std::unique_ptr<GraphModel> model;

  UNetRig() : model(testing::small_unet(memory, 8)) {}
  Batch batch() {
    auto scope = memory.activate();
    FashionMnistBatches source(testing::fashion_mnist_test_images(), 8, 32, 32, 11);
    return source.next(torch::kCPU);
  }
  StepContext context(const Batch& b) {
    StepContext ctx;
    ctx.targets = b.targets;
    return ctx;
  }
  Graph measure(const Batch& b) {
    auto scope = memory.activate();
    StepContext ctx = context(b);
    return measure_training_graph(*model, memory, b, ctx);
  }
  GraphExecution run(const plan::GraphSchedule& s, const Batch& b) {
    auto scope = memory.activate();
    StepContext ctx = context(b);
    GraphExecutor executor(*model, memory);
    return executor.run(s, b, ctx);
  }
};

TEST(GraphExecution, APlannedScheduleComputesExactlyWhatKeepingEverythingDoesWithinItsBudget) {
  UNetRig plain, planned;
  const Batch b = plain.batch(), b2 = planned.batch();
  const Graph g = plain.measure(b);
  planned.measure(b2);  // the same resident gradients in both
  const plan::GraphSchedule keep = plan::keeping_everything(g);
  const plan::GraphCost keep_cost = plan::price_graph_schedule(g, keep);
  ASSERT_TRUE(keep_cost.valid) << keep_cost.why;
  const Bytes budget = g.persistent_bytes + (keep_cost.peak_bytes - g.persistent_bytes) * 9 / 10;
  const plan::GraphPlan p = plan::plan_graph(g, budget, 30);
  ASSERT_TRUE(p.feasible) << p.note;

  const GraphExecution reference = plain.run(keep, b);
  const GraphExecution r = planned.run(p.schedule, b2);
  EXPECT_GT(r.recomputed, 0) << "90% of what keeping everything needs";
  EXPECT_EQ(reference.recomputed, 0);
  EXPECT_EQ(r.loss, reference.loss);
  const auto x = plain.model->parameters(), y = planned.model->parameters();
  ASSERT_EQ(x.size(), y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_TRUE(torch::equal(x[k].grad(), y[k].grad())) << "parameter " << k;
  }
  // What the planner's model priced is what the allocator saw.
  EXPECT_NEAR(static_cast<double>(reference.peak), static_cast<double>(keep_cost.peak_bytes),
              0.02 * static_cast<double>(keep_cost.peak_bytes));
  EXPECT_NEAR(static_cast<double>(r.peak), static_cast<double>(p.cost.peak_bytes),
              0.02 * static_cast<double>(p.cost.peak_bytes));
  EXPECT_LT(r.peak, reference.peak);
}

TEST(GraphExecution, MatchesOneAutogradPassThroughTheWholeNetwork) {
  UNetRig rig, whole;
  const Batch b = rig.batch(), b2 = whole.batch();
  const Graph g = rig.measure(b);
  const GraphExecution r = rig.run(plan::keeping_everything(g), b);

  auto scope = whole.memory.activate();
  StepContext ctx = whole.context(b2);
  const torch::Tensor loss = whole.model->forward(b2.input, ctx);
  loss.backward();
  EXPECT_EQ(r.loss, loss.item<double>());
  const auto x = rig.model->parameters(), y = whole.model->parameters();
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_TRUE(torch::equal(x[k].grad(), y[k].grad()))
        << "parameter " << k << ": " << (x[k].grad() - y[k].grad()).abs().max().item<float>();
  }
}

// The U-Net's nodes back-propagate from their inputs and output alone; each
// gives the same bits as running its forward again with grad (the default),
// for its inputs' gradients and for its weights'.
TEST(GraphExecution, EachUNetNodesBackwardEqualsAutogradThroughItsForward) {
  UNetRig rig;
  const Batch b = rig.batch();
  auto scope = rig.memory.activate();
  StepContext ctx = rig.context(b);
  GraphModel& model = *rig.model;
  std::vector<torch::Tensor> value(model.size());
  value[0] = b.input;
  torch::manual_seed(9);
  for (int i = 1; i + 1 < model.size(); ++i) {  // the loss node keeps the default
    std::vector<torch::Tensor> inputs;
    std::vector<bool> wanted;
    for (int j : model.node(i).inputs) {
      inputs.push_back(value[j]);
      wanted.push_back(j != 0);
    }
    {
      torch::NoGradGuard no_grad;
      value[i] = model.node(i).module->forward(inputs, ctx);
    }
    const torch::Tensor gy = torch::randn_like(value[i]);
    GraphNodeModule& module = *model.node(i).module;
    for (bool weights : {false, true}) {
      for (torch::Tensor p : module.parameters()) p.mutable_grad() = torch::Tensor();
      const auto own = module.backward(inputs, value[i], gy, wanted, weights, ctx);
      std::vector<torch::Tensor> own_weights;
      for (torch::Tensor p : module.parameters()) {
        own_weights.push_back(p.grad());
        p.mutable_grad() = torch::Tensor();
      }
      const auto plain = module.GraphNodeModule::backward(inputs, value[i], gy, wanted, weights, ctx);
      const std::string where = model.node(i).name + (weights ? " with weights" : " without");
      ASSERT_EQ(own.size(), plain.size()) << where;
      for (size_t p = 0; p < own.size(); ++p) {
        ASSERT_EQ(own[p].defined(), wanted[p]) << where << ", input " << p;
        if (wanted[p]) {
          EXPECT_TRUE(torch::equal(own[p], plain[p])) << where << ", input " << p;
        }
      }
      const auto params = module.parameters();
      for (size_t k = 0; k < params.size(); ++k) {
        ASSERT_EQ(own_weights[k].defined(), weights) << where << ", parameter " << k;
        if (weights) {
          EXPECT_TRUE(torch::equal(own_weights[k], params[k].grad())) << where << ", parameter " << k;
        }
      }
    }
  }
}

// The graph executor and the graph planner's pricing are backends of one
// interpreter: a schedule one refuses, the other refuses in the same words.
TEST(GraphExecution, RefusesWhatThePricingRefusesWithTheSameMessage) {
  UNetRig rig;
  const Batch b = rig.batch();
  const Graph g = rig.measure(b);
  const plan::GraphSchedule keep = plan::keeping_everything(g);
  const int n = g.size();
  std::vector<std::pair<std::string, plan::GraphSchedule>> bad;
  auto add = [&](const std::string& what, const std::function<void(plan::GraphSchedule&)>& edit) {
    plan::GraphSchedule s = keep;
    edit(s);
    bad.emplace_back(what, s);
  };
  add("keeps nothing, recomputes nothing", [](plan::GraphSchedule& s) {
    for (auto& stage : s.keep) std::fill(stage.begin(), stage.end(), 0);
  });
  add("one stage short", [](plan::GraphSchedule& s) {
    s.compute.pop_back();
    s.keep.pop_back();
  });
  add("a stage that does not compute its node", [](plan::GraphSchedule& s) { s.compute[2][2] = 0; });
  add("a stage row too short", [](plan::GraphSchedule& s) { s.compute[3].pop_back(); });
  add("keeps what the stage before did not hold", [n](plan::GraphSchedule& s) {
    s.keep[n - 1][1] = 1;
    for (int t = 2; t < n - 1; ++t) s.keep[t][1] = 0;
  });
  add("a variant the nodes do not have", [n](plan::GraphSchedule& s) {
    s.variant.assign(n, 0);
    s.variant[1] = 1;
  });
  add("variants for too few nodes", [](plan::GraphSchedule& s) { s.variant = {0}; });
  for (const auto& [what, s] : bad) {
    const plan::GraphCost priced = plan::price_graph_schedule(g, s);
    ASSERT_FALSE(priced.valid) << what;
    EXPECT_EQ(priced.why.rfind("graph schedule: ", 0), 0u) << what << ": " << priced.why;
    try {
      rig.run(s, b);
      ADD_FAILURE() << what << ": the executor ran it";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), priced.why) << what;
    }
  }
}

// A schedule that both accept: the executor's releases follow the pricing's
// liveness, so what it measured while each node ran is the pricing's figure.
TEST(GraphExecution, HoldsWhatThePricingCountsWhileEachNodeRuns) {
  UNetRig rig;
  const Batch b = rig.batch();
  const Graph g = rig.measure(b);
  const plan::GraphSchedule keep = plan::keeping_everything(g);
  const plan::GraphCost priced = plan::price_graph_schedule(g, keep);
  ASSERT_TRUE(priced.valid) << priced.why;
  const GraphExecution r = rig.run(keep, b);
  ASSERT_EQ(static_cast<int>(r.ops.size()), g.size()) << "one computation per node";
  EXPECT_NEAR(static_cast<double>(r.peak), static_cast<double>(priced.peak_bytes),
              0.02 * static_cast<double>(priced.peak_bytes));
}

}  // namespace
}  // namespace memtrain::runtime
