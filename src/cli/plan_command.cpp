// `memtrain plan`: a chain from JSON, a budget, a planner -> the schedule,
// its simulated peak and time. With --sweep: every planner over a range of
// budgets, as a table, a CSV file and a plot.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/gnuplot.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "core/graph_json.h"
#include "plan/checkmate_planner.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "plan/tradeoff_curve.h"
#include "sim/simulator.h"

namespace memtrain::cli {

namespace {

// A chain to plan: one process's step. A rank's (with a "reduction") is
// priced by `memtrain simulate`, which adds the sums to the plan.
Chain read_plannable_chain(const std::string& path) {
  Chain chain = read_chain_file(path);
  if (!chain.reduction.empty()) {
    throw UsageError("chain file '" + path +
                     "' is one rank of a data-parallel job (it has a \"reduction\"); memtrain plan plans one "
                     "process's step: price the rank's step, sums included, with memtrain simulate");
  }
  return chain;
}

const char* kPlanHelp =
    "usage: memtrain plan --chain FILE.json --budget B --planner P [--slots N | --slot-bytes N]\n"
    "                     [--json FILE] [--largest FILE.json]\n"
    "       memtrain plan --chain FILE.json --sweep [--points N] [--csv FILE] [--plot FILE.svg|.png]\n"
    "       memtrain plan --graph FILE.json --budget B [--time-limit S] [--json FILE]\n"
    "\n"
    "Plans the chain in FILE.json (format: docs/chain-format.md) and prints the schedule,\n"
    "its simulated peak memory and time, or that no schedule of this planner fits.\n"
    "\n"
    "  --chain FILE      the chain to plan\n"
    "  --budget B        bytes (4096, 64KiB, 80MiB) or N% of the chain's peak with nothing recomputed\n"
    "  --planner P       PLANNERS (default mimose)\n"
    "  --slots N         optimal: memory above the resident bytes in N slots (default 500, 1..100000)\n"
    "  --slot-bytes N    optimal: slots of N bytes instead (1: exact; the table must stay under 2^25 entries)\n"
    "  --largest FILE    static: the chain of the largest input to plan once for (default: --chain)\n"
    "  --json FILE       write feasible, peak_bytes, time and schedule as JSON\n"
    "\n"
    "  --sweep           every planner (but swap-naive, which needs weights in host memory) at --points budgets from "
    "the least any planner needs to the\n"
    "                    peak with nothing recomputed: prints simulated time over budget, writes\n"
    "                    --csv (default plan-sweep.csv) and --plot (default plan-sweep.svg; gnuplot)\n"
    "\n"
    "  --graph FILE      a network that is not a chain (format: docs/graph-format.md): the\n"
    "                    Checkmate mixed-integer program, solved with CBC; --budget is bytes or\n"
    "                    N% of the peak with nothing recomputed; --time-limit S (default 60)\n"
    "                    returns the best schedule found by then\n";

int run_graph(Flags& flags) {
  const std::string path = flags.text("graph", "");
  if (!flags.has("budget")) throw UsageError("plan: --budget B is required; see memtrain plan --help");
  const BudgetSpec spec = parse_budget(flags.text("budget", ""), "--budget");
  const double limit = flags.real("time-limit", 60, 0.01, 86400);
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  const Graph graph = read_graph_file(path);
  const plan::GraphCost all = plan::price_graph_schedule(graph, plan::keeping_everything(graph));
  const Bytes budget = spec.resolve(all.peak_bytes);
  const plan::GraphPlan p = plan::plan_graph(graph, budget, limit);
  std::printf(
      "graph of %d nodes (backward included), budget %s (%lld bytes); nothing recomputed: peak %s, time %.6g s\n",
      graph.size(), format_bytes(budget).c_str(), static_cast<long long>(budget), format_bytes(all.peak_bytes).c_str(),
      all.time);
  if (p.feasible) {
    std::printf("schedule (per stage: outputs kept into it; nodes it computes): %s\n", p.schedule.to_string().c_str());
    std::printf("peak %s (%lld bytes), time %.6g s; %s\n", format_bytes(p.cost.peak_bytes).c_str(),
                static_cast<long long>(p.cost.peak_bytes), p.cost.time, p.note.c_str());
  } else {
    std::printf("%s\n", p.note.c_str());
  }
  if (!json_path.empty()) {
    nlohmann::json compute = nlohmann::json::array(), keep = nlohmann::json::array();
    for (int t = 0; p.feasible && t < graph.size(); ++t) {
      nlohmann::json c = nlohmann::json::array(), k = nlohmann::json::array();
      for (int i = 0; i <= t; ++i) {
        if (p.schedule.compute[t][i]) c.push_back(i);
        if (i < t && p.schedule.keep[t][i]) k.push_back(i);
      }
      compute.push_back(c);
      keep.push_back(k);
    }
    const nlohmann::json j = {{"budget_bytes", budget},
                              {"feasible", p.feasible},
                              {"proven_optimal", p.proven_optimal},
                              {"peak_bytes", p.feasible ? nlohmann::json(p.cost.peak_bytes) : nlohmann::json()},
                              {"time", p.feasible ? nlohmann::json(p.cost.time) : nlohmann::json()},
                              {"compute", compute},
                              {"keep", keep},
                              {"variant", p.feasible ? nlohmann::json(p.schedule.variant) : nlohmann::json::array()},
                              {"note", p.note}};
    write_json_file(j, json_path);
  }
  return 0;
}

int run_sweep(Flags& flags, const std::string& chain_path, const plan::PlannerOptions& options) {
  const int points = static_cast<int>(flags.integer("points", 25, 2, 1000));
  const std::string csv_path = flags.text("csv", "plan-sweep.csv");
  const std::string plot_path = flags.text("plot", "plan-sweep.svg");
  const std::string terminal = gnuplot_terminal(plot_path);  // reject a bad name before the work
  flags.check_all_used();

  const Chain chain = read_plannable_chain(chain_path);
  const std::vector<std::string> planners = plan::device_weight_planner_names();
  const auto curve = plan::tradeoff_curve(chain, planners, points, options);
  const double keep_all_time = sim::simulate(chain, plan::schedule_keeping_everything(chain.size())).time;

  std::ofstream csv(csv_path);
  if (!csv) throw Error("--csv: cannot write '" + csv_path + "'");
  csv << "planner,budget_bytes,budget_fraction,feasible,time_seconds,time_over_keep_all,peak_bytes,recomputed_"
         "forwards\n";
  std::printf("simulated time / time with nothing recomputed (%.6g s); '-' where the planner finds nothing\n",
              keep_all_time);
  std::printf("%14s %8s", "budget", "of peak");
  for (const std::string& p : planners) std::printf(" %8s", p.c_str());
  std::printf("\n");
  for (size_t k = 0; k < curve.size(); k += planners.size()) {
    std::printf("%14s %7.1f%%", format_bytes(curve[k].budget_bytes).c_str(), 100 * curve[k].budget_fraction);
    for (size_t q = 0; q < planners.size(); ++q) {
      const plan::TradeoffPoint& t = curve[k + q];
      const double ratio = t.time / keep_all_time;
      if (t.feasible)
        std::printf(" %8.3f", ratio);
      else
        std::printf(" %8s", "-");
    }
    std::printf("\n");
  }
  // One planner's rows after another: gnuplot draws each line through consecutive rows.
  for (size_t q = 0; q < planners.size(); ++q) {
    for (size_t k = q; k < curve.size(); k += planners.size()) {
      const plan::TradeoffPoint& t = curve[k];
      csv << t.planner << ',' << t.budget_bytes << ',' << t.budget_fraction << ',' << (t.feasible ? 1 : 0) << ','
          << (t.feasible ? std::to_string(t.time) : "") << ','
          << (t.feasible ? std::to_string(t.time / keep_all_time) : "") << ','
          << (t.feasible ? std::to_string(t.peak_bytes) : "") << ',' << t.recomputed_forwards << '\n';
    }
  }
  csv.close();
  std::string script = terminal +
                       "set datafile separator ','\n"
                       "set key top right\n"
                       "set grid\n"
                       "set xlabel 'budget (% of the peak with nothing recomputed)'\n"
                       "set ylabel 'simulated step time / time with nothing recomputed'\n"
                       "set title 'memory/time trade-off, " +
                       std::to_string(chain.size()) + " stages'\n" +
                       gnuplot_series_plot(csv_path, planners, "100*$3", "$6", "$4 == 1");
  run_gnuplot(script);
  std::printf("wrote %s and %s\n", csv_path.c_str(), plot_path.c_str());
  return 0;
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  Flags flags(args, {"help", "sweep"}, "plan");
  if (flags.has("help")) {
    std::fputs(help_with_planners(kPlanHelp).c_str(), stdout);
    return 0;
  }
  if (flags.has("graph")) {
    if (flags.has("chain")) throw UsageError("plan: give --chain FILE or --graph FILE, not both");
    return run_graph(flags);
  }
  if (!flags.has("chain")) throw UsageError("plan: --chain FILE is required; see memtrain plan --help");
  const std::string chain_path = flags.text("chain", "");
  const plan::PlannerOptions options = parse_planner_options(flags);
  if (flags.has("sweep")) {
    for (const char* other : {"budget", "planner", "json", "largest"}) {
      if (flags.has(other))
        throw UsageError(std::string("plan: --sweep plans every planner at many budgets; drop --") + other);
    }
    return run_sweep(flags, chain_path, options);
  }
  if (!flags.has("budget")) throw UsageError("plan: --budget B is required; see memtrain plan --help");
  const BudgetSpec spec = parse_budget(flags.text("budget", ""), "--budget");
  auto planner = plan::make_planner(flags.text("planner", "mimose"), options);
  const std::string largest_path = flags.text("largest", "");
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  const Chain chain = read_plannable_chain(chain_path);
  const Chain largest = largest_path.empty() ? chain : read_plannable_chain(largest_path);
  plan::check_weights_placement(planner->name(), chain.weights_on_host, "a chain with \"weights_on_host\": true");
  const Bytes keep_all_peak = plan::keep_everything_peak(chain);
  const Bytes budget = spec.resolve(keep_all_peak);
  const Plan p = planner->plan({chain, budget, &largest});

  std::printf("planner %s, %d stages, budget %s (%lld bytes)\n", planner->name().c_str(), chain.size(),
              format_bytes(budget).c_str(), static_cast<long long>(budget));
  if (p.feasible) {
    std::printf("schedule: %s\n", p.schedule.to_string().c_str());
    std::printf("simulated peak %s (%lld bytes), time %.6g s (%d recomputed forwards; keep-all peak %s)\n",
                format_bytes(p.peak_bytes).c_str(), static_cast<long long>(p.peak_bytes), p.time,
                p.schedule.recomputed_forwards(chain.size()), format_bytes(keep_all_peak).c_str());
    if (!p.note.empty()) std::printf("%s\n", p.note.c_str());
  } else {
    std::printf("%s\n", p.note.c_str());
  }
  if (!json_path.empty()) {
    nlohmann::json j = {{"planner", planner->name()},
                        {"budget_bytes", budget},
                        {"feasible", p.feasible},
                        {"peak_bytes", p.feasible ? nlohmann::json(p.peak_bytes) : nlohmann::json()},
                        {"time", p.feasible ? nlohmann::json(p.time) : nlohmann::json()},
                        {"schedule", p.feasible ? p.schedule.to_json() : nlohmann::json::array()}};
    if (!p.feasible) j["min_budget_bytes"] = p.min_budget_bytes;
    write_json_file(j, json_path);
  }
  return 0;
}

}  // namespace memtrain::cli
