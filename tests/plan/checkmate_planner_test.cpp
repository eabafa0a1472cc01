#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "plan/checkmate_planner.h"

namespace memtrain::plan {
namespace {

// A forward graph of `n` nodes: a chain with random long skips (each node
// may also read an earlier node's output, as a U-Net's decoder reads its encoder).
Graph random_forward(int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Graph g;
  g.persistent_bytes = uniform(0, 50);
  for (int i = 0; i < n; ++i) {
    GraphNode node;
    node.name = "f" + std::to_string(i);
    node.time = uniform(1, 20);
    node.output_bytes = uniform(10, 100);
    node.temp_bytes = uniform(0, 30);
    if (i > 0) node.inputs.push_back(i - 1);
    if (i > 1 && uniform(0, 1)) node.inputs.push_back(uniform(0, i - 2));
    g.nodes.push_back(node);
  }
  return g;
}

GraphSchedule keep_everything(const Graph& g) { return keeping_everything(g); }

// A small U-Net's forward graph: encoder levels, a bottom, decoder levels that
// each read the decoder below and the encoder level of their own size.
Graph unet(int levels) {
  Graph g;
  auto add = [&](const std::string& name, double time, Bytes bytes, std::vector<int> inputs) {
    g.nodes.push_back({name, time, bytes, bytes / 4, std::move(inputs)});
    return g.size() - 1;
  };
  std::vector<int> encoder;
  int x = add("input", 0, 32, {});
  for (int l = 0; l < levels; ++l) encoder.push_back(x = add("enc" + std::to_string(l), 2, 256 >> l, {x}));
  x = add("bottom", 2, 256 >> levels, {x});
  for (int l = levels - 1; l >= 0; --l) x = add("dec" + std::to_string(l), 3, 256 >> l, {x, encoder[l]});
  add("loss", 1, 4, {x});
  return g;
}

TEST(GraphWithBackward, AddsOneBackwardNodePerForwardNodeInReverse) {
  Graph f;
  f.nodes = {{"a", 1, 10, 0, {}}, {"b", 2, 20, 0, {0}}, {"c", 3, 30, 0, {1, 0}}};
  const Graph g = with_backward(f);
  ASSERT_EQ(g.size(), 6);
  EXPECT_EQ(g.nodes[3].name, "grad c");
  EXPECT_EQ(g.nodes[3].inputs, (std::vector<int>{1, 0, 2}));  // c's inputs and c; no consumers
  EXPECT_EQ(g.nodes[3].output_bytes, 20);                     // gradient of b; a is the data
  EXPECT_EQ(g.nodes[4].inputs, (std::vector<int>{0, 1, 3}));  // b's input, b, grad c
  EXPECT_EQ(g.nodes[5].inputs, (std::vector<int>{0, 4, 3}));  // a (no inputs), grad b, grad c
  EXPECT_EQ(g.nodes[5].output_bytes, 0);
  EXPECT_DOUBLE_EQ(g.nodes[4].time, 4);
  Graph bad = f;
  bad.nodes[1].inputs = {2};
  EXPECT_THROW(bad.validate("g"), Error);
}

TEST(GraphSchedule, PricesKeepingEverythingAndRejectsAMissingInput) {
  Graph g;
  g.persistent_bytes = 5;
  g.nodes = {{"a", 1, 10, 2, {}}, {"b", 2, 20, 3, {0}}, {"c", 3, 30, 1, {1}}};
  const GraphCost c = price_graph_schedule(g, keep_everything(g));
  ASSERT_TRUE(c.valid) << c.why;
  EXPECT_DOUBLE_EQ(c.time, 6);
  // Stage 2 keeps b (a is no longer needed) and computes c: 5 + 20 + 30 + 1.
  EXPECT_EQ(c.peak_bytes, 56);
  GraphSchedule broken = keep_everything(g);
  broken.keep[2][1] = 0;
  const GraphCost d = price_graph_schedule(g, broken);
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.why, "graph schedule: stage 2, node 2 ('c'): input 1 is neither kept nor computed in this stage");
}

TEST(CheckmatePlanner, FindsTheSameOptimumAsExhaustiveSearch) {
  int compared = 0, recomputing = 0;
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    const Graph g = with_backward(random_forward(3, seed));  // 6 nodes, 2^15 schedules
    const Bytes top = price_graph_schedule(g, keep_everything(g)).peak_bytes;
    for (int k = 70; k <= 100; k += 5) {
      const Bytes budget = top * k / 100;
      const GraphPlan exact = plan_graph_exhaustively(g, budget);
      const GraphPlan mip = plan_graph(g, budget, 30);
      ASSERT_EQ(mip.feasible, exact.feasible) << "seed " << seed << " budget " << budget << ": " << mip.note;
      if (!exact.feasible) continue;
      EXPECT_TRUE(mip.proven_optimal);
      EXPECT_DOUBLE_EQ(mip.cost.time, exact.cost.time) << "seed " << seed << " budget " << budget << "\n"
                                                       << mip.schedule.to_string();
      EXPECT_LE(mip.cost.peak_bytes, budget);
      ++compared;
      recomputing += exact.cost.time > price_graph_schedule(g, keep_everything(g)).time;
    }
  }
  EXPECT_GT(compared, 18);
  EXPECT_GT(recomputing, 3);  // budgets tight enough that recomputation pays
}

// Variants (MONeT's choice of implementation) on two nodes of each graph: the
// node with the largest temporary gets a workspace large enough to bind the
// least budget and a variant with a tenth of it at half again the time;
// another node a variant that is faster and needs more.
Graph with_variants(Graph g, std::uint32_t seed) {
  std::mt19937 rng(seed * 31u + 7u);
  int largest = 1;
  for (int i = 1; i < g.size(); ++i) {
    if (g.nodes[i].temp_bytes > g.nodes[largest].temp_bytes) largest = i;
  }
  GraphNode& lean = g.nodes[largest];
  lean.temp_bytes += 300;
  lean.variants.push_back({"lean", lean.time * 1.5, lean.temp_bytes / 10});
  const int other = (largest + 1 + static_cast<int>(rng() % (g.size() - 2))) % g.size();
  GraphNode& fast = g.nodes[other];
  if (fast.variants.empty()) fast.variants.push_back({"fast", fast.time * 0.7, fast.temp_bytes + 40});
  return g;
}

TEST(CheckmatePlanner, ChoosesVariantsAsExhaustiveSearchDoes) {
  int compared = 0, chose = 0, below = 0;
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    const Graph g = with_variants(with_backward(random_forward(3, seed)), seed);
    Graph plain = g;  // the same graph without its variants
    for (GraphNode& node : plain.nodes) node.variants.clear();
    const Bytes top = price_graph_schedule(g, keep_everything(g)).peak_bytes;
    for (int k = 40; k <= 100; k += 10) {
      const Bytes budget = top * k / 100;
      const GraphPlan exact = plan_graph_exhaustively(g, budget);
      const GraphPlan mip = plan_graph(g, budget, 30);
      ASSERT_EQ(mip.feasible, exact.feasible) << "seed " << seed << " budget " << budget << ": " << mip.note;
      const GraphPlan without = plan_graph(plain, budget, 30);
      if (!exact.feasible) {
        EXPECT_FALSE(without.feasible) << "variants only add choices";
        continue;
      }
      EXPECT_TRUE(mip.proven_optimal);
      EXPECT_DOUBLE_EQ(mip.cost.time, exact.cost.time) << "seed " << seed << " budget " << budget << "\n"
                                                       << mip.schedule.to_string();
      EXPECT_LE(mip.cost.peak_bytes, budget);
      const GraphCost priced = price_graph_schedule(g, mip.schedule);
      EXPECT_DOUBLE_EQ(priced.time, mip.cost.time);
      if (without.feasible) EXPECT_LE(mip.cost.time, without.cost.time + 1e-9);
      below += !without.feasible;
      for (int v : mip.schedule.variant) chose += v != 0;
      ++compared;
    }
  }
  EXPECT_GT(compared, 10);
  EXPECT_GT(chose, 0) << "some variant should pay somewhere";
  EXPECT_GT(below, 0) << "a leaner variant should fit some budget the plain graph cannot";
}

TEST(GraphSchedule, RejectsAVariantTheNodeDoesNotHave) {
  Graph g = with_backward(random_forward(3, 2));
  GraphSchedule s = keep_everything(g);
  s.variant.assign(g.size(), 0);
  s.variant[2] = 1;
  const GraphCost c = price_graph_schedule(g, s);
  EXPECT_FALSE(c.valid);
  EXPECT_NE(c.why.find("variant 1 does not exist; the node has variants 0..0"), std::string::npos) << c.why;
}

TEST(CheckmatePlanner, PlansAUNetBelowItsKeepEverythingPeak) {
  const Graph g = with_backward(unet(3));
  const GraphCost all = price_graph_schedule(g, keep_everything(g));
  ASSERT_TRUE(all.valid);
  const Bytes budget = all.peak_bytes * 85 / 100;
  const GraphPlan p = plan_graph(g, budget, 60);
  ASSERT_TRUE(p.feasible) << p.note;
  EXPECT_TRUE(p.proven_optimal);
  EXPECT_LE(p.cost.peak_bytes, budget);
  EXPECT_GT(p.cost.time, all.time);  // it had to recompute something
  EXPECT_TRUE(price_graph_schedule(g, p.schedule).valid);
}

TEST(CheckmatePlanner, AtTheTimeLimitReturnsTheBestSoFarOrSaysSo) {
  const Graph g = with_backward(unet(5));  // 28 nodes
  const GraphCost all = price_graph_schedule(g, keep_everything(g));
  const GraphPlan p = plan_graph(g, all.peak_bytes * 6 / 10, 0.05);
  if (p.feasible) {
    EXPECT_TRUE(price_graph_schedule(g, p.schedule).valid);
    EXPECT_LE(p.cost.peak_bytes, all.peak_bytes * 6 / 10);
  } else {
    EXPECT_FALSE(p.note.empty());
  }
  EXPECT_FALSE(p.feasible && p.proven_optimal && p.note != "proven optimal");
}

TEST(CheckmatePlanner, SaysWhenNothingFits) {
  const Graph g = with_backward(random_forward(3, 3));
  const GraphPlan p = plan_graph(g, g.persistent_bytes + 1, 10);
  EXPECT_FALSE(p.feasible);
  EXPECT_EQ(p.note, "no schedule fits the budget");
  EXPECT_FALSE(plan_graph_exhaustively(g, g.persistent_bytes + 1).feasible);
}

}  // namespace
}  // namespace memtrain::plan
