// Harmony's grouped weight swapping against the per-layer, per-micro-batch
// baseline, in the Simulator, on a GPT decoder chain calibrated on a real
// machine (`memtrain calibrate --model gpt`): weights, gradients and Adam
// state in host memory, a device budget a quarter of them, M micro-batches,
// a PCIe Gen4 link, on each chain given (by default one calibrated on this
// CPU and two on an H100). It reports weight bytes moved per step and step
// time, and repeats the comparison with the chain's compute made faster (the
// host's optimizer updates keep their measured time), then with its host
// updates made faster (compute keeps its own).
#include <cstdio>
#include <sstream>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "core/json_fields.h"
#include "plan/weight_swap_planners.h"
#include "runtime/model/adam.h"
#include "sim/simulator.h"

namespace memtrain::bench {

namespace {

struct Priced {
  Plan plan;
  sim::SimResult sim;
};

Priced price(plan::Planner& planner, const Chain& chain, Bytes budget) {
  Priced p{planner.plan({chain, budget, &chain}), {}};
  if (!p.plan.feasible) {
    throw Error("planner " + planner.name() + " finds no schedule within " + format_bytes(budget) + ": " + p.plan.note);
  }
  p.sim = sim::simulate(chain, p.plan.schedule);
  return p;
}

// This machine's host Adam rate, per core, spread over another machine's
// cores: a projection of what that machine's host updates would take.
struct HostUpdateProjection {
  double measured_seconds_per_byte = 0;  // on this machine's threads
  int threads = 1;
  int cores = 0;  // of the machine projected to (0: none)
  double projected_seconds_per_byte() const { return measured_seconds_per_byte * threads / cores; }
};

// One chain's comparison: its description, the table over compute speeds,
// and its target lines.
void compare(const std::string& chain_path, double bandwidth, int micro_batches, double state_over_budget,
             const HostUpdateProjection& projection, std::ostream& md, std::ostream& targets) {
  const nlohmann::json file = read_json_file(chain_path, "chain");
  Chain chain = chain_from_json(file, "chain file '" + chain_path + "'");
  const std::string device = file.value("device", std::string("an unnamed machine"));
  chain.weights_on_host = true;
  chain.device_to_host_bandwidth = chain.host_to_device_bandwidth = bandwidth;
  const Bytes budget = static_cast<Bytes>(static_cast<double>(chain.model_state_bytes()) / state_over_budget);
  plan::PlannerOptions options;
  options.micro_batches = micro_batches;
  plan::GroupedSwapPlanner grouped(options);
  plan::PerLayerSwapPlanner per_layer(options);
  Seconds updates = 0;
  for (const Stage& s : chain.stages) updates += s.update_time;

  char line[600];
  std::snprintf(
      line, sizeof line,
      "### `%s`, calibrated on %s\n\n%d stages; weights, gradients and Adam state %s, in host memory; "
      "device budget %s (1/%g of them; the chain's resident %s included); forward and backward of one "
      "micro-batch %.4g s, host Adam updates of all stages %.4g s, as calibrated, %s.\n\n",
      chain_path.c_str(), device.c_str(), chain.size(), format_bytes(chain.model_state_bytes()).c_str(),
      format_bytes(budget).c_str(), state_over_budget, format_bytes(chain.resident_bytes).c_str(),
      chain.forward_time() + chain.backward_time(), updates,
      chain.updates_inline ? "run on the compute thread (`updates_inline`: the CPU build)" : "run beside compute");
  md << line
     << "| compute speed | swap-naive moved | swap moved | volume ratio | swap-naive step | swap step | time ratio | "
        "swap's packs |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  // The chain with its compute and its host updates each made faster.
  auto faster = [&](double compute, double updates_factor) {
    Chain fast = chain;
    for (Stage& s : fast.stages) {
      s.forward_time /= compute;
      s.backward_time /= compute;
      s.update_time /= updates_factor;
    }
    return fast;
  };
  for (double speedup : {1.0, 10.0, 100.0, 1000.0}) {
    const Chain fast = faster(speedup, 1);
    const Priced naive = price(per_layer, fast, budget);
    const Priced harmony = price(grouped, fast, budget);
    const double volume_ratio =
        static_cast<double>(naive.sim.copies.weight_bytes) / static_cast<double>(harmony.sim.copies.weight_bytes);
    const double time_ratio = naive.sim.time / harmony.sim.time;
    if (speedup == 1.0) {
      std::snprintf(line, sizeof line, "`%s`: weight bytes moved per step at least 10x lower than swap-naive (%.2fx)",
                    chain_path.c_str(), volume_ratio);
      target_line(targets, volume_ratio >= 10, line);
      std::snprintf(line, sizeof line,
                    "`%s`: simulated step time at least 3x better than swap-naive, compute as calibrated (%.2fx)",
                    chain_path.c_str(), time_ratio);
      target_line(targets, time_ratio >= 3, line);
    }
    std::snprintf(line, sizeof line, "| %s | %s | %s | %.2f | %.4g s | %.4g s | %.2f | %s |\n",
                  speedup == 1.0 ? "as calibrated" : ("x" + std::to_string(static_cast<int>(speedup))).c_str(),
                  format_bytes(naive.sim.copies.weight_bytes).c_str(),
                  format_bytes(harmony.sim.copies.weight_bytes).c_str(), volume_ratio, naive.sim.time, harmony.sim.time,
                  time_ratio, harmony.plan.note.c_str());
    md << line;
  }
  // What faster host updates (more cores on the optimizer) would buy, compute as calibrated.
  md << "\n| host updates faster by | swap-naive step | swap step | time ratio |\n|---|---|---|---|\n";
  for (double updates_factor : {2.0, 4.0, 8.0}) {
    const Chain fast = faster(1, updates_factor);
    const Priced naive = price(per_layer, fast, budget);
    const Priced harmony = price(grouped, fast, budget);
    std::snprintf(line, sizeof line, "| x%d | %.4g s | %.4g s | %.2f |\n", static_cast<int>(updates_factor),
                  naive.sim.time, harmony.sim.time, naive.sim.time / harmony.sim.time);
    md << line;
  }
  if (projection.cores > 0 && !chain.updates_inline) {
    Chain projected = chain;
    for (Stage& s : projected.stages) {
      s.update_time = projection.projected_seconds_per_byte() * static_cast<double>(s.grad_bytes);
    }
    Seconds projected_updates = 0;
    for (const Stage& s : projected.stages) projected_updates += s.update_time;
    const Priced naive = price(per_layer, projected, budget);
    const Priced harmony = price(grouped, projected, budget);
    std::snprintf(line, sizeof line,
                  "\n**Projection**, not a measurement: host updates at memtrain's host Adam rate measured on the "
                  "machine running this bench (%.3g ns per byte on %d threads), per core, times %d cores (%.3g ns "
                  "per byte; all stages %.4g s against %.4g s calibrated): swap-naive %.4g s, swap %.4g s, time "
                  "ratio **%.2f**.\n",
                  projection.measured_seconds_per_byte * 1e9, projection.threads, projection.cores,
                  projection.projected_seconds_per_byte() * 1e9, projected_updates, updates, naive.sim.time,
                  harmony.sim.time, naive.sim.time / harmony.sim.time);
    md << line;
  }
  md << "\n";
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "weight_swap_bench");
  const std::string chains = flags.text("chains",
                                        "docs/examples/gpt-w512-l8-epyc-cpu-batch2.json,"
                                        "docs/examples/gpt-w1024-l8-h100-batch2.json,"
                                        "docs/examples/gpt-w2048-l8-h100-batch2.json");
  const double bandwidth = parse_bandwidth(flags.text("bandwidth", "25GB/s"), "--bandwidth");
  const int micro_batches = static_cast<int>(flags.integer("micro-batches", 8, 1, 4096));
  const double state_over_budget = flags.real("state-over-budget", 4, 1, 1000);
  HostUpdateProjection projection;
  projection.cores = static_cast<int>(flags.integer("project-cores", 16, 0, 4096));
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();
  if (projection.cores > 0) {
    projection.threads = at::get_num_threads();
    projection.measured_seconds_per_byte = runtime::Adam::measure_host_seconds_per_byte();
  }

  std::ostringstream md, targets;
  md << "## Weight swapping: Harmony's grouping against per-layer, per-micro-batch swapping (simulated)\n\n"
     << "Command: `build/bench/weight_swap_bench` (or `scripts/bench.sh weights`)  \n"
     << "Machine running it: " << machine() << "; date " << today() << "  \n"
     << "Chains: GPT decoders (`--model gpt --layers 8`) calibrated by `memtrain calibrate --model gpt --width W "
        "--heads H --layers 8 --batch 2` (one micro-batch of 2 sentences: stage times, memory, and a host Adam "
        "update's time per byte, on the machine named). The H100 chains came from `scripts/gpu-figures.sh` "
        "(heads 16), the CPU one from this machine (width 512, heads 8). Each step: "
     << micro_batches << " micro-batches; link " << format_bytes(static_cast<Bytes>(bandwidth))
     << "/s each way (PCIe Gen4 x16).\n\n"
     << "`swap-naive`: every micro-batch runs forward and backward on its own; each stage's weights come in for its "
        "forward and again for its backward, its gradient sum goes out after every backward and comes back for the "
        "next micro-batch's. `swap`: the stages in layer packs; all micro-batches pass a pack before its weights "
        "leave, the last pack runs forward and backward without leaving, and each gradient goes out once, to an "
        "update on the host. The rows below the first divide the chain's compute times (not its host updates) by "
        "the factor named; the second table divides its host updates' times instead (compute as calibrated): what "
        "an optimizer on more host cores would buy. For chains whose updates run beside compute, a projection "
        "prices the host updates at memtrain's host Adam rate measured here, per core, on --project-cores cores "
        "(the H100 machine's 16).\n\n";
  std::stringstream list(chains);
  for (std::string path; std::getline(list, path, ',');) {
    if (!path.empty()) compare(path, bandwidth, micro_batches, state_over_budget, projection, md, targets);
  }
  md << "### Targets (weights)\n\n" << targets.str();
  publish("weight_swap_bench", md.str(), out);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("weight_swap_bench", memtrain::bench::run, argc, argv);
}
