// Activation offload measured, not simulated: the default Transformer tagger
// on Brown, every step at the dataset's largest batch (32 x 180 tokens), under
// one budget, trained by `none` (keeps everything, over the budget: the
// losses to match), `optimal` (recompute only) and `swap` (recompute and
// offload) in lockstep on the same batches. On this CPU the "device" is the counted
// pool, a copy a memcpy between pools on a thread of its own, and compute has
// one thread, so a copy hides under compute as it would beside a GPU's.
//
//   build/bench/activation_swap_train_bench [--steps N] [--budget 50%] [--out docs/BENCHMARKS.md]
#include <ATen/Parallel.h>

#include <cstdio>
#include <sstream>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/error.h"
#include "data/brown_corpus.h"
#include "data/tagging_dataset.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/input/brown_batches.h"
#include "runtime/input/largest_input_batches.h"
#include "runtime/memory/link_calibration.h"

namespace memtrain::bench {

namespace {

// One row per planner: time against optimal's, copies, peak, retries, time prediction.
void write_rows(std::ostringstream& md, const std::vector<std::string>& planners,
                std::map<std::string, LaneResult>& results, const LaneResult& recompute) {
  char line[700];
  for (const std::string& p : planners) {
    const LaneResult& r = results[p];
    std::snprintf(line, sizeof line,
                  "| %s | %.3f s | %.1f%% | %s / %s | %.1f%% (%.1f%% / %.1f%%) | %.3f | %ld | %ld | %.1f%% |\n",
                  p.c_str(), r.mean_step(), 100 * (r.mean_step() / recompute.mean_step()),
                  format_bytes(static_cast<Bytes>(r.mean_bytes(&CopyStats::to_host_bytes))).c_str(),
                  format_bytes(static_cast<Bytes>(r.mean_bytes(&CopyStats::to_device_bytes))).c_str(),
                  100 * r.copies().hidden_fraction(), 100 * r.copies().hidden_fraction(CopyDirection::ToHost),
                  100 * r.copies().hidden_fraction(CopyDirection::ToDevice), r.max_peak_over_budget(),
                  r.summary.violations, r.summary.retries, 100 * r.median_schedule_time_error());
    md << line;
  }
}

void write_targets(std::ostringstream& md, const LaneResult& swap, const LaneResult& recompute) {
  char line[700];
  const double ratio = swap.mean_step() / recompute.mean_step();
  std::snprintf(line, sizeof line, "`swap` no slower than recompute only (`optimal`), measured (%.3f of its step time)",
                ratio);
  target_line(md, ratio <= 1, line);
  std::snprintf(line, sizeof line, "`swap`'s simulated schedule time within 10%% of the measured one (median %.1f%%)",
                100 * swap.median_schedule_time_error());
  target_line(md, swap.median_schedule_time_error() <= 0.10, line);
  std::snprintf(line, sizeof line, "`swap` within the budget with no violations (max peak %.3f of the budget)",
                swap.max_peak_over_budget());
  target_line(md, swap.summary.violations == 0 && swap.max_peak_over_budget() <= 1, line);
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "activation_swap_train_bench");
  const int steps = static_cast<int>(flags.integer("steps", 12, 6, 100000));
  const std::string budget = flags.text("budget", "50%");
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();
  at::set_num_threads(1);  // one compute thread; the copy engines get the other core

  const data::BrownCorpus corpus = data::read_brown_corpus(data::find_brown_directory(""));
  auto data = std::make_shared<data::TaggingDataset>(data::make_tagging_dataset(corpus, 10000));
  const runtime::DataShape shape{data->words.size(), data->tags.size(), data->max_length, 1};
  runtime::CpuDeviceMemory probe;
  const runtime::LinkRates link = runtime::measure_link(probe, 16 * MiB, 9);
  const LaneFactory base = lanes(
      [data](std::uint64_t seed) {
        return std::make_unique<runtime::LargestInputBatches>(std::make_unique<runtime::BrownBatches>(data, 32, seed));
      },
      [shape] { return runtime::make_model("transformer", {}, shape); });
  const LaneFactory linked = [&](const runtime::TrainerOptions& o) {
    runtime::TrainerOptions h = o;
    h.steps.device_to_host_bandwidth = link.device_to_host;
    h.steps.host_to_device_bandwidth = link.host_to_device;
    return base(h);
  };
  const std::vector<std::string> planners = {"none", "optimal", "swap"};
  auto results = run_lockstep(planners, budget, steps, linked, "activations");
  for (const std::string& p : planners) {
    if (!results[p].feasible) throw Error("planner " + p + ": " + results[p].why);
  }
  const LaneResult& keep = results["none"];
  const LaneResult& recompute = results["optimal"];
  const LaneResult& swap = results["swap"];
  int equal_losses = 0;
  for (size_t k = 0; k < swap.records.size(); ++k) {
    equal_losses += swap.records[k].loss == keep.records[k].loss && recompute.records[k].loss == keep.records[k].loss;
  }

  std::ostringstream md;
  char line[700];
  md << "## Activation offload measured: training the tagger at its largest batch\n\n"
     << "Command: `build/bench/activation_swap_train_bench --steps " << steps << " --budget " << budget
     << "` (or `scripts/bench.sh activations-train`)  \n"
     << "Machine: " << machine() << "; date " << today() << "; 1 compute thread  \n";
  std::snprintf(line, sizeof line,
                "Model: the default Transformer tagger (14 stages), every step at Brown's largest batch, 32 sentences "
                "of 180 tokens; budget %s = %s. Host link measured here: %s/s to host, %s/s back (a memcpy between "
                "the counted pools on the copy threads). The three trainers step in lockstep on the same batches; "
                "times and bytes are over the %d steps after the %d collection steps. `none` keeps everything "
                "whatever the budget; its losses are the ones to match. Times compare `swap` with `optimal`.%s\n\n",
                budget.c_str(), format_bytes(swap.summary.budget_bytes).c_str(),
                format_bytes(static_cast<Bytes>(link.device_to_host)).c_str(),
                format_bytes(static_cast<Bytes>(link.host_to_device)).c_str(), steps - swap.collect_steps,
                swap.collect_steps,
                keep.mean_step() > recompute.mean_step()
                    ? " (Here `none`, which recomputes nothing, was slower than `optimal`: its time is no "
                      "reference for recompute overhead on this CPU.)"
                    : "");
  md << line;
  md << "| planner | mean step | time / optimal's | bytes to host / back per step | "
        "copy time hidden: all (to host / back) | max peak / budget | violations | retries | "
        "sim vs measured schedule time (median) |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  write_rows(md, planners, results, recompute);
  std::snprintf(line, sizeof line,
                "\n- Losses equal, bit for bit, among the three: %d of %d steps (first %.4f, last %.4f).\n"
                "- Forwards recomputed in the last step: %d by `optimal`, %d by `swap`.\n",
                equal_losses, static_cast<int>(swap.records.size()), swap.records.front().loss,
                swap.records.back().loss, recompute.records.back().recomputed_forwards,
                swap.records.back().recomputed_forwards);
  md << line;
  md << "\n### Measured (the targets are on simulated figures: see the section above)\n\n";
  write_targets(md, swap, recompute);
  publish("activation_swap_train_bench", md.str(), out);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("activation_swap_train_bench", memtrain::bench::run, argc, argv);
}
