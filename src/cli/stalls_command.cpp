// `memtrain stalls`: DS-Analyzer's question for training from packed shards:
// how much of each step waits for fetching and for preprocessing, and what
// cache size and number of prep threads would remove the wait.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/compute_threads.h"
#include "cli/flags.h"
#include "cli/help_text.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "cli/workload_flags.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "plan/registry.h"
#include "runtime/training/stall_analysis.h"

namespace memtrain::cli {

namespace {

const char* kStallsHelp =
    "usage: memtrain stalls --model resnet --data DIR [flags]\n"
    "\n"
    "Measures where the time of an epoch goes when training from packed image shards\n"
    "(DS-Analyzer): the same batches are trained on replayed from memory (the rate the model\n"
    "ingests), through the input pipeline with every sample cached (adds preprocessing) and\n"
    "read cold from storage (adds fetching). It reports the rates and the fraction of the\n"
    "cold epoch lost to fetching and to preprocessing, predicts the epoch time for other\n"
    "cache sizes and numbers of prep threads, and runs some of those to check the prediction.\n"
    "\n"
    "WORKLOAD"
    "  --batch N                    images per batch (default 32)\n"
    "  --planner P                  PLANNERS (default none)\n"
    "  --budget B                   bytes or N% (default 100%)\n"
    "  --cache-sizes LIST           what-if cache sizes, % of the dataset (default 0,25,50,75,100)\n"
    "  --max-threads N              what-if prep threads 1..N (default 4)\n"
    "  --checks LIST                CACHE%:THREADS runs that check the prediction (default 0:1,50:2)\n"
    "  --threads N                  CPU threads of training (default 1)\n"
    "  --seed N                     seed of weights, order and augmentation (default 1)\n"
    "  --json FILE                  write the rates, fractions, what-if table and checks\n";

// A percentage 0..100 as a fraction; UsageError naming `what` otherwise.
double parse_percent(const std::string& text, const std::string& what) {
  const double value = parse_whole_real(text).value_or(-1);
  if (!(value >= 0 && value <= 100)) {
    throw UsageError(what + " '" + text + "' is not a percentage; expected a number from 0 to 100");
  }
  return value / 100;
}

std::vector<double> parse_percent_list(const std::string& text, const std::string& what) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(parse_percent(trim(item), what));
  if (out.empty()) throw UsageError(what + " '" + text + "' is empty; expected percentages like 0,50,100");
  return out;
}

std::vector<std::pair<double, int>> parse_checks(const std::string& text) {
  std::vector<std::pair<double, int>> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':');
    const std::int64_t threads =
        colon == std::string::npos ? 0 : parse_whole_integer(item.substr(colon + 1)).value_or(0);
    if (colon == std::string::npos || threads < 1 || threads > 256) {
      throw UsageError("--checks item '" + item + "' is not CACHE%:THREADS, e.g. 50:2 (cache 0..100, threads 1..256)");
    }
    const double fraction = parse_percent(item.substr(0, colon), "--checks cache");
    out.emplace_back(fraction, static_cast<int>(threads));
  }
  return out;
}

nlohmann::json prediction_json(const predict::EpochPrediction& p) {
  return {{"cache_fraction", p.cache_fraction},
          {"prep_threads", p.threads},
          {"epoch_seconds", p.epoch_seconds},
          {"bottleneck", p.bottleneck}};
}

// The analysis for people.
void print_stalls(const runtime::StallReport& r, const runtime::StallOptions& options, int threads, int cores) {
  std::printf("%lld samples per epoch, %d prep threads, %d training thread(s), %d cores\n",
              static_cast<long long>(r.samples), r.threads, threads, cores);
  std::printf("epoch: synthetic %.2f s, cached %.2f s, cold %.2f s\n", r.synthetic_seconds, r.cached_seconds,
              r.cold_seconds);
  std::printf("rates (samples/s): ingestion %.0f, prep %.0f (one thread %.0f), fetch %.0f (one thread %.0f)\n",
              r.ingestion_rate, r.prep_rate, r.rates.prep_rate_one_thread, r.fetch_rate, r.rates.fetch_rate_one_thread);
  std::printf("stalls: fetching %.1f%%, preprocessing %.1f%% of the cold epoch\n", 100 * r.stalls.fetch,
              100 * r.stalls.prep);
  if (r.stalls.order_noise > 0) {
    std::printf(
        "noise: the epochs ran out of order by %.3f s (an epoch doing more work ran faster); "
        "the shares count that as no stall\n",
        r.stalls.order_noise);
  }
  std::printf("predicted epoch seconds (rows: cache %% of the dataset; columns: prep threads)\n  cache");
  for (int t = 1; t <= options.max_threads; ++t) std::printf(" %8d", t);
  for (size_t i = 0; i < r.what_if.size(); ++i) {
    if (r.what_if[i].threads == 1) std::printf("\n  %4.0f%%", 100 * r.what_if[i].cache_fraction);
    std::printf(" %8.2f", r.what_if[i].epoch_seconds);
  }
  std::printf("\n");
  for (const runtime::StallCheck& c : r.checks) {
    std::printf("check: cache %.0f%%, %d threads: predicted %.2f s (%s-bound), measured %.2f s, error %.1f%%\n",
                100 * c.predicted.cache_fraction, c.predicted.threads, c.predicted.epoch_seconds,
                c.predicted.bottleneck.c_str(), c.measured_seconds, 100 * c.relative_error);
  }
}

// The analysis as --json writes it.
nlohmann::json stalls_json(const runtime::StallReport& r, const runtime::StallOptions& options,
                           const WorkloadFlags& workload_flags, int threads) {
  nlohmann::json what_if = nlohmann::json::array(), checks = nlohmann::json::array();
  for (const predict::EpochPrediction& p : r.what_if) what_if.push_back(prediction_json(p));
  for (const runtime::StallCheck& c : r.checks) {
    checks.push_back({{"predicted", prediction_json(c.predicted)},
                      {"measured_epoch_seconds", c.measured_seconds},
                      {"relative_error", c.relative_error}});
  }
  return {{"data", workload_flags.shards.dir},
          {"model", workload_flags.model},
          {"samples", r.samples},
          {"prep_threads", r.threads},
          {"training_threads", threads},
          {"prep_cores", options.prep_cores},
          {"synthetic_epoch_seconds", r.synthetic_seconds},
          {"cached_epoch_seconds", r.cached_seconds},
          {"cold_epoch_seconds", r.cold_seconds},
          {"ingestion_rate", r.ingestion_rate},
          {"prep_rate", r.prep_rate},
          {"fetch_rate", r.fetch_rate},
          {"prep_rate_one_thread", r.rates.prep_rate_one_thread},
          {"fetch_rate_one_thread", r.rates.fetch_rate_one_thread},
          {"fetch_stall_fraction", r.stalls.fetch},
          {"prep_stall_fraction", r.stalls.prep},
          {"stall_order_noise_seconds", r.stalls.order_noise},
          {"what_if", what_if},
          {"checks", checks}};
}

}  // namespace

int run_stalls(const std::vector<std::string>& args) {
  Flags flags(args, with_workload_switches({"help"}), "stalls");
  if (flags.has("help")) {
    std::fputs(expand_help(kStallsHelp).c_str(), stdout);
    return 0;
  }
  const WorkloadFlags workload_flags = read_workload_flags(flags);
  if (workload_flags.data != "shards") {
    throw UsageError("stalls: --data must be a directory of image shards (memtrain data pack), not " +
                     workload_flags.data);
  }
  runtime::StallOptions options;
  options.trainer.steps.planner = flags.text("planner", "none");
  options.trainer.steps.planner_options = parse_planner_options(flags);
  plan::planner_traits(options.trainer.steps.planner);  // an unknown planner names the known ones
  plan::check_planner_options(options.trainer.steps.planner_options);
  options.trainer.budget = parse_budget(flags.text("budget", "100%"), "--budget");
  options.trainer.seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  const std::int64_t batch = flags.integer("batch", 32, 1, 65536);
  options.cache_fractions = parse_percent_list(flags.text("cache-sizes", "0,25,50,75,100"), "--cache-sizes");
  options.max_threads = static_cast<int>(flags.integer("max-threads", 4, 1, 256));
  options.checks = parse_checks(flags.text("checks", "0:1,50:2"));
  const int threads = static_cast<int>(flags.integer("threads", 1, 1, 1024));
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  options.source = workload_flags.shards;
  options.source.batches.batch_size = batch;
  options.source.batches.seed = options.trainer.seed;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.prep_cores = std::max(1, cores - threads);
  use_compute_threads(threads);
  const Workload workload(workload_flags);
  std::unique_ptr<runtime::DeviceMemory> memory = runtime::make_device_memory("cpu");
  const runtime::StallReport r =
      runtime::analyse_stalls(workload.model_factory(), *memory, options,
                              [](const std::string& what) { std::fprintf(stderr, "memtrain: %s\n", what.c_str()); });

  print_stalls(r, options, threads, cores);
  if (!json_path.empty()) write_json_file(stalls_json(r, options, workload_flags, threads), json_path);
  return 0;
}

}  // namespace memtrain::cli
