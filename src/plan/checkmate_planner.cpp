#include "plan/checkmate_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#if MEMTRAIN_HAS_CBC
#include <coin/Cbc_C_Interface.h>
#endif

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

#if MEMTRAIN_HAS_CBC

namespace {

// Checkmate's mixed-integer program for one graph, in CBC: R[t][i] node i
// computed at stage t, S[t][i] its output kept into stage t, Y and Z a
// node's variant, A what is alive while each node computes; memory is a
// fraction of `room`, what the budget leaves beside the resident bytes.
class CheckmateProgram {
 public:
  CheckmateProgram(const Graph& graph, double room, double time_limit)
      : graph_(graph), n_(graph.size()), room_(room), model_(Cbc_newModel()) {
    Cbc_setLogLevel(model_, 0);
    Cbc_setMaximumSeconds(model_, time_limit);
    r_.assign(n_, std::vector<int>(n_, -1));
    s_.assign(n_, std::vector<int>(n_, -1));
    y_.resize(n_);
    z_.assign(n_, std::vector<std::vector<int>>(n_));
    add_computations();
    add_variants();
    add_dependencies();
    std::vector<std::vector<int>> users(n_);
    for (int i = 0; i < n_; ++i) {
      for (int j : graph_.nodes[i].inputs) users[j].push_back(i);
    }
    for (int t = 0; t < n_; ++t) add_memory(t, users);
  }
  ~CheckmateProgram() { Cbc_deleteModel(model_); }
  CheckmateProgram(const CheckmateProgram&) = delete;
  CheckmateProgram& operator=(const CheckmateProgram&) = delete;

  Cbc_Model* model() { return model_; }
  // The schedule of CBC's best solution, keeping the least it can.
  GraphSchedule schedule_of(const double* solution) const {
    auto compute = square(n_);
    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i <= t; ++i) compute[t][i] = solution[r_[t][i]] > 0.5;
    }
    // The program may keep more than it needs; keeping the least is as fast and never uses more.
    GraphSchedule schedule = with_least_keeping(graph_, std::move(compute));
    schedule.variant.assign(n_, 0);
    for (int i = 0; i < n_; ++i) {
      for (int v = 0; v < static_cast<int>(y_[i].size()); ++v) {
        if (solution[y_[i][v]] > 0.5) schedule.variant[i] = v;
      }
    }
    return schedule;
  }

 private:
  // A node with one variant carries its time on R; one with several, on Z.
  bool single(int i) const { return graph_.nodes[i].variant_count() == 1; }
  int column(const std::string& name, double lower, double objective, bool integer) {
    Cbc_addCol(model_, name.c_str(), lower, 1.0, objective, integer ? 1 : 0, 0, nullptr, nullptr);
    return columns_++;
  }
  void row(const std::vector<int>& cols, const std::vector<double>& coefs, char sense, double rhs) {
    Cbc_addRow(model_, "", static_cast<int>(cols.size()), cols.data(), coefs.data(), sense, rhs);
  }
  // alive - sum(coefs * cols) >= rhs
  void at_least(int alive, std::vector<int> cols, const std::vector<double>& coefs, double rhs) {
    cols.insert(cols.begin(), alive);
    std::vector<double> c = {1};
    for (double x : coefs) c.push_back(-x);
    row(cols, c, 'G', rhs);
  }

  void add_computations() {
    for (int t = 0; t < n_; ++t) {
      const std::string at = std::to_string(t) + "_";
      for (int i = 0; i <= t; ++i)
        r_[t][i] =
            column("R" + at + std::to_string(i), i == t ? 1.0 : 0.0, single(i) ? graph_.nodes[i].time : 0.0, true);
      for (int i = 0; i < t; ++i) s_[t][i] = column("S" + at + std::to_string(i), 0.0, 0.0, true);
    }
  }

  // Y[i][v]: node i runs as variant v (exactly one); Z[t][i][v] >= R[t][i] + Y[i][v] - 1,
  // pushed down to R and Y both by the objective and by memory, so it is their product.
  void add_variants() {
    for (int i = 0; i < n_; ++i) {
      if (single(i)) continue;
      const GraphNode& node = graph_.nodes[i];
      for (int v = 0; v < node.variant_count(); ++v)
        y_[i].push_back(column("Y" + std::to_string(i) + "_" + std::to_string(v), 0.0, 0.0, true));
      row(y_[i], std::vector<double>(y_[i].size(), 1.0), 'E', 1);
      for (int t = i; t < n_; ++t) {
        for (int v = 0; v < node.variant_count(); ++v) {
          z_[t][i].push_back(column("", 0.0, node.time_of(v), false));
          row({z_[t][i][v], r_[t][i], y_[i][v]}, {1, -1, -1}, 'G', -1);
        }
      }
    }
  }

  void add_dependencies() {
    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i <= t; ++i) {
        for (int j : graph_.nodes[i].inputs) {  // R[t][i] <= R[t][j] + S[t][j]
          if (j < t)
            row({r_[t][i], r_[t][j], s_[t][j]}, {1, -1, -1}, 'L', 0);
          else
            row({r_[t][i], r_[t][j]}, {1, -1}, 'L', 0);
        }
      }
      if (t + 1 >= n_) continue;
      for (int i = 0; i <= t; ++i) {  // S[t+1][i] <= S[t][i] + R[t][i]
        if (i < t)
          row({s_[t + 1][i], r_[t][i], s_[t][i]}, {1, -1, -1}, 'L', 0);
        else
          row({s_[t + 1][i], r_[t][i]}, {1, -1}, 'L', 0);
      }
    }
  }

  // A[i][k] at stage t: output i alive while node k computes; each reason
  // it must be alive bounds it below, and memory bounds the sum.
  void add_memory(int t, const std::vector<std::vector<int>>& users) {
    std::vector<std::vector<int>> a(t + 1, std::vector<int>(t + 1));
    for (int i = 0; i <= t; ++i) {
      for (int k = 0; k <= t; ++k) a[i][k] = column("", 0.0, 0.0, true);
    }
    for (int k = 0; k <= t; ++k) {
      at_least(a[k][k], {r_[t][k]}, {1}, 0);                                       // its own output
      for (int i : graph_.nodes[k].inputs) at_least(a[i][k], {r_[t][k]}, {1}, 0);  // its inputs
    }
    for (int i = 0; i <= t; ++i) {
      for (int k = 0; k <= t; ++k) {
        for (int j : users[i]) {  // a later node of this stage reads it
          if (j <= k || j > t) continue;
          if (k >= i)
            at_least(a[i][k], {r_[t][j]}, {1}, 0);
          else if (i < t)
            at_least(a[i][k], {r_[t][j], s_[t][i]}, {1, 1}, -1);
        }
        if (t + 1 < n_) {  // kept for the next stage
          if (k >= i)
            at_least(a[i][k], {s_[t + 1][i]}, {1}, 0);
          else if (i < t)
            at_least(a[i][k], {s_[t + 1][i], s_[t][i]}, {1, 1}, -1);
        }
      }
    }
    // Memory while computing k, as a fraction of the room the budget leaves;
    // a hair under 1 so CBC's tolerances cannot overrun it.
    for (int k = 0; k <= t; ++k) {
      std::vector<int> cols;
      std::vector<double> coefs;
      const GraphNode& node = graph_.nodes[k];
      for (int v = 0; v < (single(k) ? 1 : node.variant_count()); ++v) {
        cols.push_back(single(k) ? r_[t][k] : z_[t][k][v]);
        coefs.push_back(static_cast<double>(single(k) ? node.temp_bytes : node.temp_of(v)) / room_);
      }
      for (int i = 0; i <= t; ++i) {
        cols.push_back(a[i][k]);
        coefs.push_back(static_cast<double>(graph_.nodes[i].output_bytes) / room_);
      }
      row(cols, coefs, 'L', 1.0 - 1e-9);
    }
  }

  const Graph& graph_;
  const int n_;
  const double room_;
  Cbc_Model* model_;
  int columns_ = 0;
  std::vector<std::vector<int>> r_, s_, y_;
  std::vector<std::vector<std::vector<int>>> z_;
};

}  // namespace

GraphPlan plan_graph(const Graph& graph, Bytes budget, double time_limit) {
  graph.validate("graph");
  GraphPlan plan;
  const double room = static_cast<double>(budget - graph.persistent_bytes);
  if (room <= 0) {
    plan.note = "the budget does not cover the resident bytes";
    return plan;
  }
  CheckmateProgram program(graph, room, time_limit);
  Cbc_solve(program.model());
  const double* solution = Cbc_bestSolution(program.model());
  if (!solution) {
    plan.note = Cbc_isProvenInfeasible(program.model())
                    ? "no schedule fits the budget"
                    : "no schedule found within the time limit of " + std::to_string(time_limit) + " s";
    return plan;
  }
  plan.schedule = program.schedule_of(solution);
  plan.cost = price_graph_schedule(graph, plan.schedule);
  // The program encodes the graph's rules and its memory constraint keeps a
  // margin under the budget, so a solution the pricing refuses is a bug.
  MEMTRAIN_ASSERT(plan.cost.valid, "the solver's schedule is valid: " + plan.cost.why);
  MEMTRAIN_ASSERT(plan.cost.peak_bytes <= budget, "the solver's schedule fits the budget: peak " +
                                                      std::to_string(plan.cost.peak_bytes) + " bytes, budget " +
                                                      std::to_string(budget));
  plan.feasible = true;
  plan.proven_optimal = Cbc_isProvenOptimal(program.model());
  plan.note = plan.proven_optimal ? "proven optimal" : "best found within the time limit";
  return plan;
}

#else

GraphPlan plan_graph(const Graph& graph, Bytes, double) {
  graph.validate("graph");
  throw UsageError(
      "the graph planner solves a mixed-integer program with COIN-OR CBC, and this build of memtrain was made "
      "without it; install CBC's headers (Debian: coinor-libcbc-dev; conda: coin-or-cbc) and build memtrain again");
}

#endif

}  // namespace memtrain::plan
