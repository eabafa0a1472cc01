// Activation offload against recompute only, in the Simulator, on chains
// calibrated on real machines (`memtrain calibrate`): at every budget from the
// least `optimal` needs to the peak with nothing recomputed, the overhead over
// keeping everything of `optimal` (recompute only), of the dynamic program
// with offloads (swap's exact candidate) and of `swap` (recompute and
// offload) at a given host-link bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "plan/optimal_planner.h"
#include "plan/schedule_builders.h"
#include "plan/swap_planner.h"
#include "sim/simulator.h"

namespace memtrain::bench {

namespace {

struct Point {
  Bytes budget = 0;
  bool optimal_fits = false, exact_fits = false, swap_fits = false;
  double optimal_overhead = 0, exact_overhead = 0, swap_overhead = 0;  // time / keep-all time - 1
  Bytes swap_bytes = 0;
  double hidden = 1;
};

std::string percent(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

// Each planner's overhead at `points` + 1 budgets from `least` to keeping everything.
std::vector<Point> budget_curve(const Chain& chain, const sim::SimResult& keep, Bytes least, int points) {
  std::vector<Point> curve;
  plan::OptimalPlanner optimal;
  plan::SwapPlanner swap;
  plan::OptimalPlanner exact({}, false, true);  // swap's exact candidate, alone
  for (int k = 0; k <= points; ++k) {
    Point p;
    p.budget = least + (keep.peak_bytes - least) * k / points;
    const Plan o = optimal.plan({chain, p.budget}), s = swap.plan({chain, p.budget});
    p.optimal_fits = o.feasible;
    p.swap_fits = s.feasible;
    if (o.feasible) p.optimal_overhead = o.time / keep.time - 1;
    const Plan e = exact.plan({chain, p.budget});
    p.exact_fits = e.feasible;
    if (e.feasible) p.exact_overhead = e.time / keep.time - 1;
    if (s.feasible) {
      p.swap_overhead = s.time / keep.time - 1;
      const sim::SimResult r = sim::simulate(chain, s.schedule);
      p.swap_bytes = r.copies.bytes();
      p.hidden = r.copies.hidden_fraction();
    }
    curve.push_back(p);
  }
  return curve;
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "swap_bench");
  std::stringstream list(
      flags.text("chains",
                 "docs/examples/tagger-h100-batch256.json,docs/examples/gpt-w1024-l8-h100-batch2.json,"
                 "docs/examples/gpt-w2048-l8-h100-batch2.json,docs/examples/tagger-epyc-cpu-batch32.json"));
  const double bandwidth = parse_bandwidth(flags.text("bandwidth", "25GB/s"), "--bandwidth");
  const int points = static_cast<int>(flags.integer("points", 120, 10, 10000));
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();

  std::ostringstream md;
  md << "## Activation offload against recompute only (simulated)\n\n"
     << "Command: `build/bench/swap_bench` (or `scripts/bench.sh swap`)  \n"
     << "Machine running it: " << machine() << "; date " << today() << "  \n"
     << "Chains: calibrated with `memtrain calibrate` (stage times and memory at the largest batch; the GPT "
        "chains with their weights on the device, so only activations move); the host "
        "link is set to "
     << format_bytes(static_cast<Bytes>(bandwidth)) << "/s each way (PCIe Gen4 x16). "
     << "Overheads are simulated step time over the time with nothing recomputed, minus 1; `swap` offloads "
        "checkpointed activations, and what forwards with grad keep beyond their outputs, where the copies hide "
        "under compute.\n\n";
  std::string chain_path;
  bool all_never_worse = true, all_half = true;
  while (std::getline(list, chain_path, ',')) {
    Chain chain = read_chain_file(chain_path);
    chain.device_to_host_bandwidth = chain.host_to_device_bandwidth = bandwidth;
    const sim::SimResult keep = sim::simulate(chain, plan::schedule_keeping_everything(chain.size()));
    plan::OptimalPlanner optimal;
    const Bytes least = optimal.plan({chain, 0}).min_budget_bytes;
    const std::vector<Point> curve = budget_curve(chain, keep, least, points);
    // The budget where recompute only costs closest to 30%.
    const Point* at30 = nullptr;
    double worst_ratio = 0, best_gain = 0;
    for (const Point& p : curve) {
      if (!p.optimal_fits) continue;
      if (!at30 || std::abs(p.optimal_overhead - 0.30) < std::abs(at30->optimal_overhead - 0.30)) at30 = &p;
      const double ratio = (1 + p.swap_overhead) / (1 + p.optimal_overhead);
      worst_ratio = std::max(worst_ratio, ratio);
      best_gain = std::max(best_gain, 1 - ratio);
    }
    md << "### " << chain_path << "\n\n"
       << chain.size() << " stages; keep-everything peak " << format_bytes(keep.peak_bytes) << ", time " << keep.time
       << " s; least budget of `optimal` " << format_bytes(least) << ".\n\n"
       << "| budget | of peak | optimal overhead | dynamic program with offloads | swap overhead | swapped per step | "
          "copy time hidden |\n"
       << "|---|---|---|---|---|---|---|\n";
    for (int k = 0; k <= points; k += std::max(1, points / 10)) {
      const Point& p = curve[k];
      md << "| " << format_bytes(p.budget) << " | " << percent(static_cast<double>(p.budget) / keep.peak_bytes) << " | "
         << (p.optimal_fits ? percent(p.optimal_overhead) : "-") << " | "
         << (p.exact_fits ? percent(p.exact_overhead) : "-") << " | " << (p.swap_fits ? percent(p.swap_overhead) : "-")
         << " | " << format_bytes(p.swap_bytes) << " | " << percent(p.hidden) << " |\n";
    }
    const bool never_worse = worst_ratio <= 1 + 1e-12;
    all_never_worse = all_never_worse && never_worse;
    md << "\nOver all " << points + 1 << " budgets: swap / optimal step time at most " << worst_ratio << ", best gain "
       << percent(best_gain) << ".\n";
    if (at30) {
      const bool half = at30->swap_overhead <= at30->optimal_overhead / 2;
      all_half = all_half && half;
      md << "Where recompute only costs closest to 30% (" << percent(at30->optimal_overhead) << " at "
         << format_bytes(at30->budget) << "): swap costs " << percent(at30->swap_overhead) << " ("
         << (half ? "at most half" : "more than half") << "). "
         << "There a step holds " << format_bytes(keep.peak_bytes - at30->budget)
         << " less than keeping everything at its peak; during the " << chain.forward_time()
         << " s forward pass the link can move "
         << format_bytes(static_cast<Bytes>(chain.device_to_host_bandwidth * chain.forward_time()))
         << " to the host, so at least the rest must be dropped and recomputed or wait for copies, whatever the "
            "planner.\n\n";
    }
  }
  md << "### Targets (activations only)\n\n";
  target_line(md, all_half, "`swap` at most half the overhead of recompute only where that is 30%, on every chain");
  target_line(md, all_never_worse, "`swap` never slower than recompute only (`optimal`) at any budget");
  publish("swap_bench", md.str(), out);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) { return memtrain::bench::bench_main("swap_bench", memtrain::bench::run, argc, argv); }
