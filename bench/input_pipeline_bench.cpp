// The input pipeline's targets, with real processes:
//  - stalls: `memtrain stalls` on packed Fashion-MNIST; its checked
//    predictions against the measured epoch times (target: within 15%);
//  - coordination: three `memtrain train` jobs on the same shards, first
//    independent, then as one `--coordinate` group, side by side in one run;
//    their prep CPU time (target: coordinated at most 40% of independent)
//    and each job's training time (target: at least 1.5x faster when
//    preprocessing is the bottleneck, which this configuration makes it).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/lockstep.h"
#include "bench/memtrain_processes.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/seconds_since.h"

namespace memtrain::bench {

namespace {

using nlohmann::json;

struct JobResult {
  double wall = 0;       // process start to exit, s
  double training = 0;   // sum of its steps, s
  double prep_cpu = 0;   // s
  double data_wait = 0;  // fraction of its steps' time
  double last_loss = 0;
};

// `jobs` training processes at once; coordinated as one group when `group` is not empty.
std::vector<JobResult> run_jobs(const std::vector<std::string>& train, int jobs, const std::string& group,
                                const std::string& dir) {
  std::vector<pid_t> pids;
  std::vector<std::string> reports, logs;
  const auto t0 = std::chrono::steady_clock::now();
  for (int j = 0; j < jobs; ++j) {
    std::vector<std::string> args = train;
    reports.push_back(dir + "/job" + std::to_string(j) + (group.empty() ? "-alone" : "-group") + ".json");
    logs.push_back(reports.back() + ".log");
    args.insert(args.end(), {"--json", reports.back()});
    if (!group.empty()) args.insert(args.end(), {"--coordinate", group, "--jobs", std::to_string(jobs)});
    pids.push_back(start_memtrain(args, logs.back()));
  }
  std::vector<JobResult> out;
  for (int j = 0; j < jobs; ++j) {
    finish_memtrain(pids[static_cast<size_t>(j)], logs[static_cast<size_t>(j)]);
    JobResult r;
    r.wall = seconds_since(t0);
    const json report = read_json_file(reports[static_cast<size_t>(j)]);
    r.training = report["summary"]["mean_step_seconds"].get<double>() * report["summary"]["steps"].get<double>();
    r.prep_cpu = report["input_pipeline"]["prep_cpu_seconds"].get<double>();
    r.data_wait = report["summary"]["data_wait_fraction"].get<double>();
    r.last_loss = report["steps"].back()["loss"].get<double>();
    out.push_back(r);
  }
  return out;
}

// The stall predictions against the measured epochs; returns the worst relative error.
double write_checks(std::ostringstream& md, const json& s) {
  double worst = 0;
  for (const json& c : s["checks"]) {
    const json& p = c["predicted"];
    worst = std::max(worst, c["relative_error"].get<double>());
    md << "| " << fixed(100 * p["cache_fraction"].get<double>(), 0) << "%, " << p["prep_threads"].get<int>() << " | "
       << fixed(p["epoch_seconds"], 2) << " | " << p["bottleneck"].get<std::string>() << " | "
       << fixed(c["measured_epoch_seconds"], 2) << " | " << fixed(100 * c["relative_error"].get<double>(), 1)
       << "% |\n";
  }
  return worst;
}

// The jobs alone and coordinated: their times, prep CPU and last losses;
// then the targets, the stall predictions' (`worst` error) first.
void write_jobs(std::ostringstream& md, const std::vector<JobResult>& alone, const std::vector<JobResult>& group,
                std::int64_t epochs, double worst) {
  const int jobs = static_cast<int>(alone.size());
  md << "\n### " << jobs << " jobs on the same shards, " << epochs << " epochs, sides 8..16 px\n\n"
     << "| job | independent: training s / wall s / prep CPU s / data wait | coordinated: training s / wall s / prep "
        "CPU s / data wait |\n|---|---|---|\n";
  double alone_cpu = 0, group_cpu = 0, slowest_speedup = 1e9;
  bool same_losses = true;
  for (int j = 0; j < jobs; ++j) {
    const JobResult& a = alone[static_cast<size_t>(j)];
    const JobResult& g = group[static_cast<size_t>(j)];
    alone_cpu += a.prep_cpu;
    group_cpu += g.prep_cpu;
    slowest_speedup = std::min(slowest_speedup, a.training / g.training);
    same_losses = same_losses && a.last_loss == g.last_loss;
    md << "| " << j + 1 << " | " << fixed(a.training, 2) << " / " << fixed(a.wall, 2) << " / " << fixed(a.prep_cpu, 2)
       << " / " << fixed(100 * a.data_wait, 0) << "% | " << fixed(g.training, 2) << " / " << fixed(g.wall, 2) << " / "
       << fixed(g.prep_cpu, 2) << " / " << fixed(100 * g.data_wait, 0) << "% |\n";
  }
  md << "\nTraining time is the sum of a job's steps (its data waits included); wall time runs from the start of all "
        "jobs to that job's exit (start-up, data loading and calibration included).\n\n";
  target_line(md, worst <= 0.15,
              "stall predictions within 15% of the measured epoch times: worst " + fixed(100 * worst, 1) + "%");
  target_line(md, group_cpu <= 0.4 * alone_cpu,
              "coordinated prep CPU at most 40% of independent: " + fixed(group_cpu, 2) + " s against " +
                  fixed(alone_cpu, 2) + " s = " + fixed(100 * group_cpu / alone_cpu, 0) + "%");
  target_line(md, slowest_speedup >= 1.5,
              "each coordinated job at least 1.5x faster (training time): the slowest gain is " +
                  fixed(slowest_speedup, 2) + "x");
  md << "- The jobs' last losses are " << (same_losses ? "identical" : "**not** identical")
     << " with and without coordination: a coordinated job trains on exactly the batches it would prepare itself.\n";
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "input_pipeline_bench");
  const std::string out_path = flags.text("out", "docs/BENCHMARKS.md");
  const std::int64_t images = flags.integer("images", 6000, 100, 60000);
  const std::int64_t resolution = flags.integer("resolution", 448, 28, 2048);
  const int jobs = static_cast<int>(flags.integer("jobs", 3, 2, 16));
  const std::int64_t epochs = flags.integer("epochs", 2, 1, 100);
  flags.check_all_used();

  char pattern[] = "/tmp/memtrain-pipeline-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string shards = dir + "/fm";
  std::fprintf(stderr, "input_pipeline_bench: packing %lld images at %lld px\n", static_cast<long long>(images),
               static_cast<long long>(resolution));
  run_memtrain({"data", "pack", "--from", "fashion-mnist", "--out", shards, "--resolution", std::to_string(resolution),
                "--limit", std::to_string(images), "--shard-size", "16MiB"},
               dir + "/pack.log");

  // A small model at small sides, so that decoding the large JPEGs is what limits the steps.
  const std::vector<std::string> workload = {"--model",   "resnet", "--width",        "4",  "--layers",  "1",
                                             "--data",    shards,   "--batch",        "64", "--planner", "none",
                                             "--threads", "1",      "--prep-threads", "1"};
  std::vector<std::string> stalls = {"stalls"};
  stalls.insert(stalls.end(), workload.begin(), workload.end());
  stalls.insert(stalls.end(), {"--min-scale", "16", "--max-scale", "32", "--checks", "0:1,50:2,100:1", "--json",
                               dir + "/stalls.json"});
  std::fprintf(stderr, "input_pipeline_bench: memtrain stalls\n");
  run_memtrain(stalls, dir + "/stalls.log");
  const json s = read_json_file(dir + "/stalls.json");

  std::vector<std::string> train = {"train"};
  train.insert(train.end(), workload.begin(), workload.end());
  train.insert(train.end(), {"--min-scale", "8", "--max-scale", "16", "--epochs", std::to_string(epochs), "--quiet"});
  std::fprintf(stderr, "input_pipeline_bench: %d independent jobs, then %d coordinated\n", jobs, jobs);
  const std::vector<JobResult> alone = run_jobs(train, jobs, "", dir);
  const std::vector<JobResult> group = run_jobs(train, jobs, "bench-" + std::to_string(::getpid()), dir);
  std::system(("rm -rf '" + dir + "'").c_str());

  std::ostringstream md;
  md << "## Input pipeline: stalls and coordinated preprocessing (CPU)\n\n"
     << "Command: `build/bench/input_pipeline_bench` (or `scripts/bench.sh pipeline`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Data: " << images << " Fashion-MNIST images packed as " << resolution
     << " px JPEGs; model: ResNet width 4, 1 block per group, batch 64, planner none, 1 training thread, "
        "1 prep thread per job.\n\n"
     << "### Stalls (`memtrain stalls`, sides 16..32 px)\n\n"
     << "| epoch | seconds |\n|---|---|\n"
     << "| synthetic (replayed from memory) | " << fixed(s["synthetic_epoch_seconds"], 2) << " |\n"
     << "| cached (every sample a hit) | " << fixed(s["cached_epoch_seconds"], 2) << " |\n"
     << "| cold (every sample from storage) | " << fixed(s["cold_epoch_seconds"], 2) << " |\n\n"
     << "Rates (samples/s): ingestion " << fixed(s["ingestion_rate"], 0) << ", prep " << fixed(s["prep_rate"], 0)
     << " (one thread " << fixed(s["prep_rate_one_thread"], 0) << "), fetch " << fixed(s["fetch_rate"], 0)
     << " (one thread " << fixed(s["fetch_rate_one_thread"], 0) << "). Stalls: fetching "
     << fixed(100 * s["fetch_stall_fraction"].get<double>(), 1) << "%, preprocessing "
     << fixed(100 * s["prep_stall_fraction"].get<double>(), 1) << "% of the cold epoch.\n\n"
     << "| check: cache, prep threads | predicted s | bottleneck | measured s | error |\n|---|---|---|---|---|\n";
  const double worst = write_checks(md, s);
  write_jobs(md, alone, group, epochs, worst);
  publish("input_pipeline_bench", md.str(), out_path);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("input_pipeline_bench", memtrain::bench::run, argc, argv);
}
