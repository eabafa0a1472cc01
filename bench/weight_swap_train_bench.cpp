// Weight swapping measured, not simulated: a GPT decoder on Brown trained
// with its weights, gradients and Adam state in host memory under a device
// budget a quarter of them, by `swap` (Harmony) and by `swap-naive` (per
// stage, per micro-batch) stepping in lockstep on the same batches. On this
// CPU the "device" is the counted pool and a copy a memcpy between pools, so
// the step times say what the copies cost here; the bytes moved, the losses
// and the Simulator's error are what carry over to a GPU.
//
//   build/bench/weight_swap_train_bench [--steps N] [--micro-batches M] [--out docs/BENCHMARKS.md]
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/error.h"
#include "data/brown_corpus.h"
#include "data/tagging_dataset.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/input/brown_batches.h"
#include "runtime/memory/link_calibration.h"

namespace memtrain::bench {

namespace {

constexpr const char* kFixedLink = "fixed-link";

// `base`'s lanes with the weights in host memory, split into `micro_batches`, planned with `link`.
LaneFactory with_weights_on_host(const LaneFactory& base, const runtime::LinkRates& link, int micro_batches) {
  return [base, link, micro_batches](const runtime::TrainerOptions& o) {
    runtime::TrainerOptions h = o;
    h.weights_on_host = true;
    h.micro_batches = micro_batches;
    h.steps.device_to_host_bandwidth = link.device_to_host;
    h.steps.host_to_device_bandwidth = link.host_to_device;
    // A lane named "P fixed-link" is planner P keeping the measured link
    // instead of refining it from its copies: the same planner side by side.
    const std::string fixed = " " + std::string(kFixedLink);
    if (h.steps.planner.size() > fixed.size() &&
        h.steps.planner.compare(h.steps.planner.size() - fixed.size(), fixed.size(), fixed) == 0) {
      h.steps.planner.resize(h.steps.planner.size() - fixed.size());
      h.steps.refine_link = false;
    }
    return base(h);
  };
}

// One row per planner (the copies, the step, the peak, the retries), then the copies' own rates.
void write_copies(std::ostringstream& md, const std::vector<std::string>& planners,
                  std::map<std::string, LaneResult>& results) {
  char line[600];
  md << "| planner | weights and gradients moved / step | all bytes to host / back per step | mean step | "
        "copy time hidden: all (to host / back) | max peak / budget | violations | retries | "
        "sim vs measured schedule time (median) |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& p : planners) {
    const LaneResult& r = results[p];
    std::snprintf(line, sizeof line,
                  "| %s | %s | %s / %s | %.3f s | %.1f%% (%.1f%% / %.1f%%) | %.3f | %ld | %ld | %.1f%% |\n", p.c_str(),
                  format_bytes(static_cast<Bytes>(r.mean_bytes(&CopyStats::weight_bytes))).c_str(),
                  format_bytes(static_cast<Bytes>(r.mean_bytes(&CopyStats::to_host_bytes))).c_str(),
                  format_bytes(static_cast<Bytes>(r.mean_bytes(&CopyStats::to_device_bytes))).c_str(), r.mean_step(),
                  100 * r.copies().hidden_fraction(), 100 * r.copies().hidden_fraction(CopyDirection::ToHost),
                  100 * r.copies().hidden_fraction(CopyDirection::ToDevice), r.max_peak_over_budget(),
                  r.summary.violations, r.summary.retries, 100 * r.median_schedule_time_error());
    md << line;
  }
  md << "\n`swap fixed-link` is `swap` planning and predicting with the link measured before training, not "
        "refining it from its copies (summary `to_host_bandwidth`/`to_device_bandwidth`). The copies' own rates over "
        "those steps:";
  for (const std::string& p : planners) {
    const LaneResult& r = results[p];
    md << " `" << p << "` " << format_bytes(static_cast<Bytes>(r.copy_rate(true))) << "/s to host and "
       << format_bytes(static_cast<Bytes>(r.copy_rate(false))) << "/s back" << (&p == &planners.back() ? ".\n" : ";");
  }
  md << "\nCopy time hidden is 1 - compute's waits on copies / the copies' own time, 0 where the waits were "
        "longer. `swap` offloads a pack's gradients and then, with no compute between, drops the pack's weights, "
        "which waits for them (the Simulator prices the same wait): the gradients' copies cannot hide";
  // Said only of a run that shows it: its waits on copies to host at least as long as those copies.
  if (results["swap"].copies().hidden_fraction(CopyDirection::ToHost) == 0) {
    md << ", and on this CPU compute waits longer than they take (a copy thread's wake-up and a hand-off per "
          "tensor), which can cancel what the weights' copies back hide";
  }
  md << ".\n";
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "weight_swap_train_bench");
  const int steps = static_cast<int>(flags.integer("steps", 24, 6, 100000));
  const int micro_batches = static_cast<int>(flags.integer("micro-batches", 8, 2, 8));
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();
  at::set_num_threads(1);  // one compute thread; the copy engines get the other core

  const data::BrownCorpus corpus = data::read_brown_corpus(data::find_brown_directory(""));
  auto data = std::make_shared<data::TaggingDataset>(data::make_tagging_dataset(corpus, 2000));
  const runtime::DataShape shape{data->words.size(), data->tags.size(), data->max_length, 1};
  runtime::ModelSpec spec;
  spec.layers = 6;
  spec.width = 256;
  spec.heads = 4;
  const std::int64_t batch = 8;
  auto model = [shape, spec] { return runtime::make_model("gpt", spec, shape); };
  Bytes state = 0;
  for (const torch::Tensor& p : model().parameters()) state += 4 * static_cast<Bytes>(p.nbytes());
  const Bytes budget = state / 4;

  runtime::CpuDeviceMemory probe;
  const runtime::LinkRates link = runtime::measure_link(probe, 16 * MiB, 9);
  const LaneFactory base = lanes(
      [data, batch](std::uint64_t seed) {
        return std::make_unique<runtime::BrownBatches>(data, batch, seed, runtime::BrownTargets::NextWord);
      },
      model);
  const LaneFactory on_host = with_weights_on_host(base, link, micro_batches);
  const std::vector<std::string> planners = {"swap", "swap-naive", "swap " + std::string(kFixedLink)};
  auto results = run_lockstep(planners, std::to_string(budget), steps, on_host, "weights in host memory");
  for (const std::string& p : planners) {
    if (!results[p].feasible) throw Error("planner " + p + ": " + results[p].why);
  }
  const LaneResult& harmony = results["swap"];
  const LaneResult& naive = results["swap-naive"];
  int equal_losses = 0;
  for (size_t k = 0; k < harmony.records.size(); ++k) equal_losses += harmony.records[k].loss == naive.records[k].loss;

  std::ostringstream md;
  char line[600];
  md << "## Weight swapping measured: training with the weights in host memory\n\n"
     << "Command: `build/bench/weight_swap_train_bench --steps " << steps << " --micro-batches " << micro_batches
     << "` (or `scripts/bench.sh weights-train`)  \n"
     << "Machine: " << machine() << "; date " << today() << "; 1 compute thread  \n";
  std::snprintf(line, sizeof line,
                "Model: `--model gpt --layers 6 --width 256 --heads 4 --vocab 2000`, batch %lld sentences of Brown as "
                "next-word prediction, %d micro-batches per step. Weights, gradients and Adam state: %s in the host "
                "pool; device budget %s (a quarter). Host link measured here: %s/s to host, %s/s back (a memcpy "
                "between the counted pools on the copy threads). Both trainers step in lockstep on the same "
                "batches; times and bytes are over the %d steps after the %d collection steps.\n\n",
                static_cast<long long>(batch), micro_batches, format_bytes(state).c_str(), format_bytes(budget).c_str(),
                format_bytes(static_cast<Bytes>(link.device_to_host)).c_str(),
                format_bytes(static_cast<Bytes>(link.host_to_device)).c_str(), steps - harmony.collect_steps,
                harmony.collect_steps);
  md << line;
  write_copies(md, planners, results);
  const double volume_ratio = naive.mean_bytes(&CopyStats::weight_bytes) / harmony.mean_bytes(&CopyStats::weight_bytes);
  std::snprintf(line, sizeof line,
                "\n- Measured volume ratio swap-naive / swap: %.2fx; step time ratio on this CPU: %.2fx.\n"
                "- Losses equal, bit for bit, between the two: %d of %d steps (first %.4f, last %.4f).\n",
                volume_ratio, naive.mean_step() / harmony.mean_step(), equal_losses,
                static_cast<int>(harmony.records.size()), harmony.records.front().loss, harmony.records.back().loss);
  md << line;
  md << "\n### Targets (weights, measured)\n\n";
  std::snprintf(line, sizeof line, "weight bytes moved per step at least 10x lower than swap-naive, measured (%.2fx)",
                volume_ratio);
  target_line(md, volume_ratio >= 10, line);
  const double error = harmony.median_schedule_time_error();
  std::snprintf(line, sizeof line, "swap's simulated step time within 10%% of the measured one here (median %.1f%%)",
                100 * error);
  target_line(md, error <= 0.10, line);
  publish("weight_swap_train_bench", md.str(), out);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("weight_swap_train_bench", memtrain::bench::run, argc, argv);
}
