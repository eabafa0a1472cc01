// `memtrain simulate`: a chain, a planner and a budget -> the planner's
// schedule priced by the Simulator with the host link's copy engines: time,
// peak, bytes moved each way and how much of the copying hid under compute.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/copy_stats_json.h"
#include "cli/flags.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "plan/gradient_sums.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"

namespace memtrain::cli {

namespace {

const char* kSimulateHelp =
    "usage: memtrain simulate --chain FILE.json --planner P --budget B [--bandwidth BW]\n"
    "                         [--d2h-bandwidth BW --h2d-bandwidth BW] [--slots N | --slot-bytes N]\n"
    "                         [--weights-on device|host] [--micro-batches N] [--json FILE]\n"
    "\n"
    "Plans the chain with planner P and prices the schedule on the Simulator's timelines:\n"
    "compute and one copy engine per direction between device and host memory. A chain with a\n"
    "\"reduction\" is one rank of a data-parallel job: the planner plans for the budget less the\n"
    "reduction's reserve, each gradient bucket is summed over the ranks right after its last\n"
    "backward, on a network timeline of its own, and the step ends when the last sum has.\n"
    "\n"
    "  --chain FILE        the chain (docs/chain-format.md); `memtrain calibrate --json` writes one\n"
    "                      with the machine's measured bandwidths\n"
    "  --planner P         PLANNERS (default swap)\n"
    "  --budget B          bytes or N% of the chain's peak with nothing recomputed\n"
    "  --bandwidth BW      both directions, e.g. 25GB/s (PCIe Gen4 x16); overrides the chain's\n"
    "  --d2h-bandwidth BW, --h2d-bandwidth BW   each direction on its own\n"
    "  --weights-on host   weights, gradients and optimizer state live in host memory; the\n"
    "                      planner swaps them (swap: Harmony's layer packs; swap-naive: per stage\n"
    "                      and micro-batch). N% budgets are then of the peak with all of it on the device\n"
    "  --micro-batches N   split the step into N micro-batches of the chain's size (default 1)\n"
    "  --json FILE         write time, peak_bytes, host_peak_bytes, the copies' figures (swap_bytes,\n"
    "                      transfer_seconds, stall_seconds, hidden_transfer_fraction, each also per\n"
    "                      direction as to_host_... and to_device_...; weight_swap_bytes), the sums'\n"
    "                      (reduce_seconds, reduce_stall_seconds, reduce_hidden_fraction) and the schedule\n"
    "\n"
    "usage: memtrain simulate --jobs FILE.json --policy P --budget B [--json FILE]\n"
    "\n"
    "Prices several jobs sharing one device (docs/jobs.md): each step's lease decided by policy P\n"
    "(static, proportional, fcfs, tensile or arbiter), planned by the job's planner, priced by the\n"
    "Simulator; the jobs share the budget, the device's compute and its copy engines. B: bytes or\n"
    "N% of the sum of the jobs' peaks with nothing recomputed at their chains' inputs.\n"
    "\n"
    "usage: memtrain simulate --jobs FILE.json --sweep [--points N] [--csv FILE] [--plot FILE.svg|.png]\n"
    "\n"
    "Every policy at N budgets (default 16) from the least at which any policy completes the group\n"
    "to 100%: makespans in a table, a CSV (default jobs-sweep.csv) and a plot with a line per policy\n"
    "(default jobs-sweep.svg; gnuplot).\n";

// A feasible plan's schedule simulated: what it costs, printed and added to `j`.
void report_schedule(Chain chain, const Plan& p, const GradientReduction& reduction, int micro_batches,
                     nlohmann::json& j) {
  chain.reduction = reduction;
  const Schedule schedule =
      reduction.empty() ? p.schedule : plan::with_gradient_sums(p.schedule, reduction.first_stages());
  const sim::SimResult r = sim::simulate(chain, schedule);
  const CopyStats& c = r.copies;
  std::printf("schedule: %s\n", schedule.to_string().c_str());
  if (chain.weights_on_host) {
    std::printf(
        "weights in host memory (%s with gradients and optimizer state), %d micro-batches: "
        "%s of weights and gradients moved\n",
        format_bytes(chain.model_state_bytes()).c_str(), micro_batches, format_bytes(r.copies.weight_bytes).c_str());
  }
  std::printf(
      "time %.6g s, peak %s (%lld bytes); swapped %s (%lld bytes: %s to host, %s back), host peak %s; "
      "copies %.6g s, %.1f%% hidden under compute (%.1f%% to host, %.1f%% back)\n",
      r.time, format_bytes(r.peak_bytes).c_str(), static_cast<long long>(r.peak_bytes), format_bytes(c.bytes()).c_str(),
      static_cast<long long>(c.bytes()), format_bytes(c.to_host_bytes).c_str(), format_bytes(c.to_device_bytes).c_str(),
      format_bytes(r.host_peak_bytes).c_str(), c.seconds(), 100 * c.hidden_fraction(),
      100 * c.hidden_fraction(CopyDirection::ToHost), 100 * c.hidden_fraction(CopyDirection::ToDevice));
  if (!reduction.empty()) {
    std::printf(
        "gradient sums over the ranks: %d buckets, %s, %.6g s on the network, %.1f%% hidden under the "
        "backward; %s set aside for their copies\n",
        r.reduce.buckets, format_bytes(r.reduce.bytes).c_str(), r.reduce.seconds, 100 * r.reduce.hidden_fraction(),
        format_bytes(reduction.reserve_bytes).c_str());
    j["reduce_seconds"] = r.reduce.seconds;
    j["reduce_stall_seconds"] = r.reduce.stall_seconds;
    j["reduce_hidden_fraction"] = r.reduce.hidden_fraction();
  }
  if (!p.note.empty()) std::printf("%s\n", p.note.c_str());
  j["time"] = r.time;
  j["peak_bytes"] = r.peak_bytes;
  j["host_peak_bytes"] = r.host_peak_bytes;
  add_copy_stats(j, c);
  j["update_seconds"] = r.update_seconds;
  j["micro_batches"] = micro_batches;
  j["weights_on_host"] = chain.weights_on_host;
  j["recomputed_forwards"] = p.schedule.recomputed_forwards(chain.size());
  j["schedule"] = schedule.to_json();
}

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--jobs") return run_simulate_jobs(args);
  }
  Flags flags(args, {"help"}, "simulate");
  if (flags.has("help")) {
    std::fputs(help_with_planners(kSimulateHelp).c_str(), stdout);
    return 0;
  }
  if (!flags.has("chain")) throw UsageError("simulate: --chain FILE is required; see memtrain simulate --help");
  if (!flags.has("budget")) throw UsageError("simulate: --budget B is required; see memtrain simulate --help");
  const std::string chain_path = flags.text("chain", "");
  const BudgetSpec spec = parse_budget(flags.text("budget", ""), "--budget");
  plan::PlannerOptions options = parse_planner_options(flags);
  const WeightFlags weights = parse_weight_flags(flags);
  options.micro_batches = weights.micro_batches;
  auto planner = plan::make_planner(flags.text("planner", "swap"), options);
  const LinkFlags links = parse_link_flags(flags);
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  Chain chain = read_chain_file(chain_path);
  // A rank's step: the planner plans it without the sums, which follow each bucket's backward.
  const GradientReduction reduction = chain.reduction;
  chain.reduction = {};
  links.apply(chain);
  // A chain measured with its weights on the device updated them all there;
  // in host memory, the host updates them.
  if (weights.on_host && !chain.weights_on_host) chain.update_temp_bytes = 0;
  chain.weights_on_host = chain.weights_on_host || weights.on_host;
  plan::check_weights_placement(planner->name(), chain.weights_on_host, "--weights-on host");
  // N% of the step with nothing recomputed, nothing swapped, every weight on the device.
  const Bytes budget = spec.resolve(plan::keep_everything_peak(chain));
  const Plan p = planner->plan({chain, budget - reduction.reserve_bytes, &chain});
  std::printf("planner %s, %d stages, budget %s (%lld bytes); host link %s/s to host, %s/s back\n",
              planner->name().c_str(), chain.size(), format_bytes(budget).c_str(), static_cast<long long>(budget),
              format_bytes(static_cast<Bytes>(chain.device_to_host_bandwidth)).c_str(),
              format_bytes(static_cast<Bytes>(chain.host_to_device_bandwidth)).c_str());
  nlohmann::json j = {{"planner", planner->name()}, {"budget_bytes", budget}, {"feasible", p.feasible}};
  if (p.feasible) {
    report_schedule(chain, p, reduction, options.micro_batches, j);
  } else {
    std::printf("%s\n", p.note.c_str());
    j["min_budget_bytes"] = p.min_budget_bytes;
  }
  if (!json_path.empty()) {
    write_json_file(j, json_path);
  }
  return p.feasible ? 0 : 1;
}

}  // namespace memtrain::cli
