// Trains the Brown tagger with none, all, sqrt, static and mimose side by
// side at budgets of 30%, 50% and 70% of the unconstrained peak, and times
// planning. The five trainers of one budget step in lockstep (one step each
// in turn, on the same batches), so machine noise hits them alike and the
// ratios compare like with like. Writes a Markdown report.
//
//   build/bench/planner_bench [--steps N] [--out docs/BENCHMARKS.md] [--budgets 30,50,70]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <ATen/Parallel.h>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/seconds_since.h"
#include "data/brown_corpus.h"
#include "data/tagging_dataset.h"
#include "plan/registry.h"
#include "predict/plan_cache.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/input/brown_batches.h"
#include "runtime/training/trainer.h"
#include "sim/simulator.h"

namespace memtrain::bench {
namespace {

using Clock = std::chrono::steady_clock;
const std::vector<std::string> kPlanners = {"none", "all", "sqrt", "static", "mimose"};

// Planning a new size = predicting its chain + planning it; a hit = one lookup.
struct PlanningTimes {
  int stages = 0;
  double new_size_us = 0;
  double cache_hit_us = 0;
};

PlanningTimes time_planning(std::shared_ptr<const data::TaggingDataset> data, int layers) {
  runtime::CpuDeviceMemory memory;
  runtime::BrownBatches source(data, 32, 1);
  runtime::ModelSpec spec;
  spec.layers = layers;
  const runtime::DataShape shape{data->words.size(), data->tags.size(), data->max_length, 1};
  runtime::TrainerOptions o;
  o.steps.collect_steps = 4;
  runtime::Trainer trainer(
      o, memory, [&] { return runtime::make_model("transformer", spec, shape); }, source);
  for (int s = 0; s < o.steps.collect_steps; ++s) trainer.step();  // a predictor that has learned
  const auto planner = plan::make_planner("mimose");
  const std::int64_t largest = trainer.largest_signature().size;
  const int sizes = 2000;
  const Clock::time_point t0 = Clock::now();
  long feasible = 0;
  for (int k = 0; k < sizes; ++k) {
    const std::int64_t size = 32 * (2 + k % (largest / 32 - 1));
    const Chain chain = trainer.predictor().predict(size);
    feasible += planner->plan({chain, trainer.budget_bytes()}).feasible;
  }
  PlanningTimes t;
  t.stages = trainer.model().size();
  t.new_size_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / sizes;
  if (feasible == 0) throw Error("planning benchmark: no size was feasible");
  predict::PlanCache cache(90);
  for (std::int64_t b = 1; b <= 64; ++b) cache.store(b * 90, Plan{});
  const int lookups = 1000000;
  long hits = 0;
  const Clock::time_point t1 = Clock::now();
  for (int k = 0; k < lookups; ++k) hits += cache.find(1 + (k * 37) % 5760) != nullptr;
  t.cache_hit_us = std::chrono::duration<double, std::micro>(Clock::now() - t1).count() / lookups;
  if (hits != lookups) throw Error("planning benchmark: expected every lookup to hit");
  return t;
}

double default_job_seconds(std::shared_ptr<const data::TaggingDataset> data) {
  // What `memtrain train` does after loading the corpus: build, calibrate, 40 steps.
  const Clock::time_point t0 = Clock::now();
  runtime::CpuDeviceMemory memory;
  runtime::BrownBatches source(data, 32, 1);
  const runtime::DataShape shape{data->words.size(), data->tags.size(), data->max_length, 1};
  runtime::Trainer trainer(
      {}, memory, [&] { return runtime::make_model("transformer", {}, shape); }, source);
  for (int s = 0; s < 40; ++s) trainer.step();
  return seconds_since(t0);
}

using LaneResults = std::map<std::string, std::map<std::string, LaneResult>>;  // by budget, then planner

// One row per budget and planner.
void write_planners_table(std::ostringstream& md, const std::vector<std::string>& budgets, LaneResults& all) {
  for (const std::string& b : budgets) {
    const double none = all[b]["none"].mean_step();
    for (const std::string& p : kPlanners) {
      const LaneResult& r = all[b][p];
      md << "| " << b << " | " << p << " | ";
      if (!r.feasible) {
        md << "infeasible: " << r.why.substr(0, r.why.find(" that planner")) << " | | | | | | | |\n";
        continue;
      }
      const auto& s = r.summary;
      md << format_number("%.3f", r.mean_step() / none) << " (" << format_number("%.3f", r.mean_step()) << " s) | "
         << format_number("%.3f", r.max_peak_over_budget()) << " | " << s.violations << " | " << s.retries << " ("
         << format_number("%.1f", 100.0 * s.retries / s.steps) << "%) | "
         << format_number("%.2f%%", 100 * s.median_prediction_error) << " | "
         << format_number("%.2f%%", 100 * s.max_prediction_error) << " | "
         << format_number("%.0f%%", 100 * r.cache_hit_rate()) << " | "
         << format_number("%.1f us", 1e6 * s.mean_new_plan_seconds) << " |\n";
    }
  }
}

// The targets on the planners' runs: violations, prediction error, retries, speed at 50%.
void write_run_targets(std::ostringstream& md, LaneResults& all) {
  auto line = [&](bool ok, const std::string& what) { target_line(md, ok, what); };
  long violations = 0, retries = 0, steps_total = 0;
  double median_err = 0, max_err = 0;
  for (const auto& [b, rs] : all) {
    for (const auto& [p, r] : rs) {
      if (p == "none" || !r.feasible) continue;
      violations += r.summary.violations;
      retries += r.summary.retries;
      steps_total += r.summary.steps;
      if (p == "mimose" || p == "static") {
        median_err = std::max(median_err, r.summary.median_prediction_error);
        max_err = std::max(max_err, r.summary.max_prediction_error);
      }
    }
  }
  line(violations == 0, "zero budget violations where a plan exists: " + std::to_string(violations));
  line(median_err <= 0.03 && max_err <= 0.10, "prediction error (mimose, static; worst run) median " +
                                                  format_number("%.2f%%", 100 * median_err) + " <= 3%, max " +
                                                  format_number("%.2f%%", 100 * max_err) + " <= 10%");
  line(retries <= 0.02 * steps_total,
       "retries " + std::to_string(retries) + " of " + std::to_string(steps_total) + " steps <= 2%");
  if (!all.count("50%")) return;
  auto& r = all["50%"];
  const double m = r["mimose"].mean_step();
  if (!(r["static"].feasible && r["all"].feasible && r["mimose"].feasible)) return;
  line(r["static"].mean_step() / m >= 1.15, "at 50%, mimose " + format_number("%.2f", r["static"].mean_step() / m) +
                                                "x faster per step than static (target 1.15x)");
  line(r["all"].mean_step() / m >= 1.25, "at 50%, mimose " + format_number("%.2f", r["all"].mean_step() / m) +
                                             "x faster per step than all (target 1.25x)");
  line(m / r["none"].mean_step() <= 1.15,
       "at 50%, mimose within " + format_number("%.2f", m / r["none"].mean_step()) + "x of none (target 1.15x)");
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "planner_bench");
  const int steps = static_cast<int>(flags.integer("steps", 60, 10, 100000));
  const std::string out_path = flags.text("out", "docs/BENCHMARKS.md");
  const std::vector<std::string> budgets = percent_budgets(flags.text("budgets", "30,50,70"));
  flags.check_all_used();
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));

  const Clock::time_point load0 = Clock::now();
  const data::BrownCorpus corpus = data::read_brown_corpus(data::find_brown_directory(""));
  auto data = std::make_shared<data::TaggingDataset>(data::make_tagging_dataset(corpus, 10000));
  const double load_seconds = seconds_since(load0);

  std::ostringstream md;
  md << "## Planners on the Brown tagger (CPU)\n\n"
     << "Command: `build/bench/planner_bench --steps " << steps << "` (or `scripts/bench.sh planner`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Model: the default Transformer tagger (6 layers, width 128, 4 heads, 14 stages), batch 32, seed 1; " << steps
     << " steps per planner, the five planners of a budget stepping in lockstep on the same batches. "
     << "Step times are means over the steps after the 4 collection steps. Budgets are a percentage of the "
     << "unconstrained peak of the largest batch (32x180).\n\n"
     << "| budget | planner | step time / none | max peak / budget | violations | retries | median pred. err. | "
        "max pred. err. | cache hit rate | planning per new size |\n"
     << "|---|---|---|---|---|---|---|---|---|---|\n";
  LaneResults all;
  for (const std::string& b : budgets) all[b] = run_lockstep(kPlanners, b, steps, tagger_lanes(data), "tagger");
  write_planners_table(md, budgets, all);
  md << "\n`none` ignores the budget (it is run unenforced, so its violations count the steps it would not have "
        "fit); the other planners run with the budget enforced by memtrain's allocator, so a misprediction shows "
        "as a retry, never as a violation.\n\n";

  md << "### Targets\n\n";
  write_run_targets(md, all);
  auto line = [&](bool ok, const std::string& what) { target_line(md, ok, what); };
  const PlanningTimes t = time_planning(data, 11);
  line(t.new_size_us < 1000, "planning a new size for a " + std::to_string(t.stages) +
                                 "-stage chain (predict + mimose): " + format_number("%.1f us", t.new_size_us) +
                                 " < 1 ms");
  line(t.cache_hit_us < 10, "a plan-cache hit: " + format_number("%.3f us", t.cache_hit_us) + " < 10 us");
  const double job = default_job_seconds(data);
  line(job + load_seconds < 60,
       "40 steps of the default `memtrain train`: " + format_number("%.1f s", job + load_seconds) +
           " (corpus loading " + format_number("%.1f s", load_seconds) + ") < 60 s");
  md << "\n";

  publish("planner_bench", md.str(), out_path);
  return 0;
}

}  // namespace
}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("planner_bench", memtrain::bench::run, argc, argv);
}
