// `memtrain plan`: a chain from JSON, a budget, a planner -> the schedule,
// its simulated peak and time.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"

namespace memtrain::cli {

namespace {

const char* kPlanHelp =
    "usage: memtrain plan --chain FILE.json --budget B --planner P [--json FILE] [--largest FILE.json]\n"
    "\n"
    "Plans the chain in FILE.json (format: docs/chain-format.md) and prints the schedule,\n"
    "its simulated peak memory and time, or that no schedule of this planner fits.\n"
    "\n"
    "  --chain FILE      the chain to plan\n"
    "  --budget B        bytes (4096, 64KiB, 80MiB) or N% of the chain's peak with nothing recomputed\n"
    "  --planner P       all, mimose, none, sqrt, static (default mimose)\n"
    "  --largest FILE    static: the chain of the largest input to plan once for (default: --chain)\n"
    "  --json FILE       write feasible, peak_bytes, time and schedule as JSON\n";

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  Flags flags(args, {"help"}, "plan");
  if (flags.has("help")) {
    std::fputs(kPlanHelp, stdout);
    return 0;
  }
  if (!flags.has("chain")) throw UsageError("plan: --chain FILE is required; see memtrain plan --help");
  if (!flags.has("budget")) throw UsageError("plan: --budget B is required; see memtrain plan --help");
  const std::string chain_path = flags.text("chain", "");
  const BudgetSpec spec = parse_budget(flags.text("budget", ""), "--budget");
  auto planner = plan::make_planner(flags.text("planner", "mimose"));
  const std::string largest_path = flags.text("largest", "");
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  const Chain chain = read_chain_file(chain_path);
  const Chain largest = largest_path.empty() ? chain : read_chain_file(largest_path);
  const Bytes keep_all_peak =
      sim::simulate(chain, plan::schedule_keeping_everything(chain.size())).peak_bytes;
  const Bytes budget = spec.resolve(keep_all_peak);
  const Plan p = planner->plan({chain, budget, &largest});

  std::printf("planner %s, %d stages, budget %s (%lld bytes)\n", planner->name().c_str(), chain.size(),
              format_bytes(budget).c_str(), static_cast<long long>(budget));
  if (p.feasible) {
    std::printf("schedule: %s\n", p.schedule.to_string().c_str());
    std::printf("simulated peak %s (%lld bytes), time %.6g s (%d recomputed forwards; keep-all peak %s)\n",
                format_bytes(p.peak_bytes).c_str(), static_cast<long long>(p.peak_bytes), p.time,
                p.schedule.recomputed_forwards(chain.size()), format_bytes(keep_all_peak).c_str());
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
    std::ofstream out(json_path);
    if (!out) throw Error("--json: cannot write '" + json_path + "'");
    out << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace memtrain::cli
