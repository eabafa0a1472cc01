#include "plan/checkmate_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <coin/Cbc_C_Interface.h>

#include "core/error.h"
#include "core/graph_schedule_interpreter.h"

namespace memtrain::plan {

namespace {

std::vector<std::vector<char>> square(int n) { return std::vector<std::vector<char>>(n, std::vector<char>(n, 0)); }

}  // namespace

namespace {

// The graph planner's backend: bytes held while each node runs, and time.
class GraphPricing : public GraphScheduleBackend {
 public:
  explicit GraphPricing(const Graph& graph) : graph_(graph) {}
  void compute(int, int k, int variant, bool, const std::vector<char>& alive) override {
    Bytes mem = graph_.persistent_bytes + graph_.nodes[k].temp_of(variant);
    for (int i = 0; i < graph_.size(); ++i) {
      if (alive[i]) mem += graph_.nodes[i].output_bytes;
    }
    cost.peak_bytes = std::max(cost.peak_bytes, mem);
    cost.time += graph_.nodes[k].time_of(variant);
  }
  void release(int) override {}
  GraphCost cost;

 private:
  const Graph& graph_;
};

}  // namespace

GraphCost price_graph_schedule(const Graph& graph, const GraphSchedule& s) {
  GraphCost c;
  c.why = graph_schedule_fault(graph, s);
  if (!c.why.empty()) return c;
  GraphPricing pricing(graph);
  interpret_graph_schedule(graph, s, pricing);
  pricing.cost.valid = true;
  return pricing.cost;
}

GraphSchedule with_least_keeping(const Graph& graph, std::vector<std::vector<char>> compute) {
  const int n = graph.size();
  GraphSchedule s;
  s.compute = std::move(compute);
  s.keep = square(n);
  for (int i = 0; i < n; ++i) {
    bool needed_next = false;  // needed entering stage t + 1
    for (int t = n - 1; t > i; --t) {
      bool used = false;
      for (int k = i + 1; k <= t && !used; ++k) {
        if (!s.compute[t][k]) continue;
        const auto& in = graph.nodes[k].inputs;
        used = std::find(in.begin(), in.end(), i) != in.end();
      }
      const bool needed = !s.compute[t][i] && (used || needed_next);
      s.keep[t][i] = needed;
      needed_next = needed;
    }
  }
  return s;
}

GraphSchedule keeping_everything(const Graph& graph) {
  auto compute = square(graph.size());
  for (int t = 0; t < graph.size(); ++t) compute[t][t] = 1;
  return with_least_keeping(graph, std::move(compute));
}

GraphPlan plan_graph_exhaustively(const Graph& graph, Bytes budget) {
  const int n = graph.size();
  if (n > 7) throw UsageError("exhaustive graph planning: " + std::to_string(n) + " nodes; at most 7");
  std::vector<std::pair<int, int>> free_bits;  // (t, i) with i < t
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < t; ++i) free_bits.push_back({t, i});
  }
  GraphPlan best;
  for (unsigned long mask = 0; mask < (1ul << free_bits.size()); ++mask) {
    auto compute = square(n);
    for (int t = 0; t < n; ++t) compute[t][t] = 1;
    for (size_t b = 0; b < free_bits.size(); ++b) {
      if (mask >> b & 1) compute[free_bits[b].first][free_bits[b].second] = 1;
    }
    GraphSchedule s = with_least_keeping(graph, std::move(compute));
    // Every choice of variants, as an odometer over the nodes' counts.
    s.variant.assign(n, 0);
    for (;;) {
      const GraphCost c = price_graph_schedule(graph, s);
      if (c.valid && c.peak_bytes <= budget && (!best.feasible || c.time < best.cost.time)) {
        best.feasible = true;
        best.proven_optimal = true;
        best.schedule = s;
        best.cost = c;
      }
      int i = 0;
      while (i < n && ++s.variant[i] == graph.nodes[i].variant_count()) s.variant[i++] = 0;
      if (i == n) break;
    }
  }
  best.note = best.feasible ? "exhaustive search" : "no schedule fits the budget";
  return best;
}

GraphPlan plan_graph(const Graph& graph, Bytes budget, double time_limit) {
  graph.validate("graph");
  const int n = graph.size();
  GraphPlan plan;
  const double room = static_cast<double>(budget - graph.persistent_bytes);
  if (room <= 0) {
    plan.note = "the budget does not cover the resident bytes";
    return plan;
  }
  Cbc_Model* model = Cbc_newModel();
  struct Guard {
    Cbc_Model* m;
    ~Guard() { Cbc_deleteModel(m); }
  } guard{model};
  Cbc_setLogLevel(model, 0);
  Cbc_setMaximumSeconds(model, time_limit);

  // Column indices of R[t][i] (i <= t) and S[t][i] (i < t).
  std::vector<std::vector<int>> r(n, std::vector<int>(n, -1)), s(n, std::vector<int>(n, -1));
  int columns = 0;
  // A node with one variant carries its time on R; one with several, on Z.
  auto single = [&](int i) { return graph.nodes[i].variant_count() == 1; };
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i <= t; ++i) {
      const double fixed = i == t ? 1.0 : 0.0;
      Cbc_addCol(model, ("R" + std::to_string(t) + "_" + std::to_string(i)).c_str(), fixed, 1.0,
                 single(i) ? graph.nodes[i].time : 0.0, 1, 0, nullptr, nullptr);
      r[t][i] = columns++;
    }
    for (int i = 0; i < t; ++i) {
      Cbc_addCol(model, ("S" + std::to_string(t) + "_" + std::to_string(i)).c_str(), 0.0, 1.0, 0.0, 1, 0, nullptr,
                 nullptr);
      s[t][i] = columns++;
    }
  }
  auto row = [&](const std::vector<int>& cols, const std::vector<double>& coefs, char sense, double rhs) {
    Cbc_addRow(model, "", static_cast<int>(cols.size()), cols.data(), coefs.data(), sense, rhs);
  };
  // Y[i][v]: node i runs as variant v (exactly one); Z[t][i][v] >= R[t][i] + Y[i][v] - 1,
  // pushed down to R and Y both by the objective and by memory, so it is their product.
  std::vector<std::vector<int>> y(n);
  std::vector<std::vector<std::vector<int>>> z(n, std::vector<std::vector<int>>(n));
  for (int i = 0; i < n; ++i) {
    if (single(i)) continue;
    const GraphNode& node = graph.nodes[i];
    std::vector<double> ones;
    for (int v = 0; v < node.variant_count(); ++v) {
      Cbc_addCol(model, ("Y" + std::to_string(i) + "_" + std::to_string(v)).c_str(), 0.0, 1.0, 0.0, 1, 0, nullptr,
                 nullptr);
      y[i].push_back(columns++);
      ones.push_back(1);
    }
    row(y[i], ones, 'E', 1);
    for (int t = i; t < n; ++t) {
      for (int v = 0; v < node.variant_count(); ++v) {
        Cbc_addCol(model, "", 0.0, 1.0, node.time_of(v), 0, 0, nullptr, nullptr);
        z[t][i].push_back(columns++);
        row({z[t][i][v], r[t][i], y[i][v]}, {1, -1, -1}, 'G', -1);
      }
    }
  }
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i <= t; ++i) {
      for (int j : graph.nodes[i].inputs) {  // R[t][i] <= R[t][j] + S[t][j]
        std::vector<int> cols = {r[t][i], r[t][j]};
        std::vector<double> coefs = {1, -1};
        if (j < t) {
          cols.push_back(s[t][j]);
          coefs.push_back(-1);
        }
        row(cols, coefs, 'L', 0);
      }
    }
    if (t + 1 < n) {
      for (int i = 0; i <= t; ++i) {  // S[t+1][i] <= S[t][i] + R[t][i]
        std::vector<int> cols = {s[t + 1][i], r[t][i]};
        std::vector<double> coefs = {1, -1};
        if (i < t) {
          cols.push_back(s[t][i]);
          coefs.push_back(-1);
        }
        row(cols, coefs, 'L', 0);
      }
    }
  }
  // A[t][i][k]: output i alive while stage t computes node k; each reason it
  // must be alive bounds it below, and memory bounds the sum.
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    for (int j : graph.nodes[i].inputs) users[j].push_back(i);
  }
  for (int t = 0; t < n; ++t) {
    std::vector<std::vector<int>> a(t + 1, std::vector<int>(t + 1));
    for (int i = 0; i <= t; ++i) {
      for (int k = 0; k <= t; ++k) {
        Cbc_addCol(model, "", 0.0, 1.0, 0.0, 1, 0, nullptr, nullptr);
        a[i][k] = columns++;
      }
    }
    auto at_least = [&](int alive, std::vector<int> cols, std::vector<double> coefs, double rhs) {
      // alive - sum(coefs * cols) >= rhs
      cols.insert(cols.begin(), alive);
      std::vector<double> c = {1};
      for (double x : coefs) c.push_back(-x);
      row(cols, c, 'G', rhs);
    };
    for (int k = 0; k <= t; ++k) {
      at_least(a[k][k], {r[t][k]}, {1}, 0);                                      // its own output
      for (int i : graph.nodes[k].inputs) at_least(a[i][k], {r[t][k]}, {1}, 0);  // its inputs
    }
    for (int i = 0; i <= t; ++i) {
      for (int k = 0; k <= t; ++k) {
        for (int j : users[i]) {  // a later node of this stage reads it
          if (j <= k || j > t) continue;
          if (k >= i)
            at_least(a[i][k], {r[t][j]}, {1}, 0);
          else if (i < t)
            at_least(a[i][k], {r[t][j], s[t][i]}, {1, 1}, -1);
        }
        if (t + 1 < n) {  // kept for the next stage
          if (k >= i)
            at_least(a[i][k], {s[t + 1][i]}, {1}, 0);
          else if (i < t)
            at_least(a[i][k], {s[t + 1][i], s[t][i]}, {1, 1}, -1);
        }
      }
    }
    // Memory while computing k, as a fraction of the room the budget leaves;
    // a hair under 1 so CBC's tolerances cannot overrun it.
    for (int k = 0; k <= t; ++k) {
      std::vector<int> cols;
      std::vector<double> coefs;
      if (single(k)) {
        cols.push_back(r[t][k]);
        coefs.push_back(static_cast<double>(graph.nodes[k].temp_bytes) / room);
      } else {
        for (int v = 0; v < graph.nodes[k].variant_count(); ++v) {
          cols.push_back(z[t][k][v]);
          coefs.push_back(static_cast<double>(graph.nodes[k].temp_of(v)) / room);
        }
      }
      for (int i = 0; i <= t; ++i) {
        cols.push_back(a[i][k]);
        coefs.push_back(static_cast<double>(graph.nodes[i].output_bytes) / room);
      }
      row(cols, coefs, 'L', 1.0 - 1e-9);
    }
  }
  Cbc_solve(model);
  const double* solution = Cbc_bestSolution(model);
  if (!solution) {
    plan.note = Cbc_isProvenInfeasible(model)
                    ? "no schedule fits the budget"
                    : "no schedule found within the time limit of " + std::to_string(time_limit) + " s";
    return plan;
  }
  auto compute = square(n);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i <= t; ++i) compute[t][i] = solution[r[t][i]] > 0.5;
  }
  // The program may keep more than it needs; keeping the least is as fast and never uses more.
  plan.schedule = with_least_keeping(graph, std::move(compute));
  plan.schedule.variant.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int v = 0; v < static_cast<int>(y[i].size()); ++v) {
      if (solution[y[i][v]] > 0.5) plan.schedule.variant[i] = v;
    }
  }
  plan.cost = price_graph_schedule(graph, plan.schedule);
  // The program encodes the graph's rules and its memory constraint keeps a
  // margin under the budget, so a solution the pricing refuses is a bug.
  MEMTRAIN_ASSERT(plan.cost.valid, "the solver's schedule is valid: " + plan.cost.why);
  MEMTRAIN_ASSERT(plan.cost.peak_bytes <= budget, "the solver's schedule fits the budget: peak " +
                                                      std::to_string(plan.cost.peak_bytes) + " bytes, budget " +
                                                      std::to_string(budget));
  plan.feasible = true;
  plan.proven_optimal = Cbc_isProvenOptimal(model);
  plan.note = plan.proven_optimal ? "proven optimal" : "best found within the time limit";
  return plan;
}

}  // namespace memtrain::plan
