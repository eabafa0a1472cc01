#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/blas_library.h"
#include "cli/commands.h"
#include "cli/train_report.h"
#include "core/chain_json.h"
#include "core/units.h"
#include "data/tar_shard.h"
#include "plan/registry.h"
#include "predict/measurement.h"
#include "support/chains.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::cli {
namespace {

using nlohmann::json;

struct Outcome {
  int status;
  std::string err;
  std::string out;
};

Outcome run(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStderr();
  ::testing::internal::CaptureStdout();
  const int status = run_memtrain(args);
  std::string out = ::testing::internal::GetCapturedStdout();
  return {status, ::testing::internal::GetCapturedStderr(), std::move(out)};
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The share of copy time hidden, both ways together, is the two ways'
// shares weighted by their copy time, so it lies between them.
void expect_between_the_two_ways(const json& j) {
  const double both = j["hidden_transfer_fraction"].get<double>();
  const double to_host = j["to_host_hidden_fraction"].get<double>();
  const double to_device = j["to_device_hidden_fraction"].get<double>();
  EXPECT_GE(both, std::min(to_host, to_device) - 1e-12) << j.dump();
  EXPECT_LE(both, std::max(to_host, to_device) + 1e-12) << j.dump();
}

// A command refused as bad input: exit status 2 and a message saying why.
void expect_refused(const std::vector<std::string>& args, const std::string& message) {
  const Outcome o = run(args);
  EXPECT_EQ(o.status, 2) << message;
  EXPECT_NE(o.err.find(message), std::string::npos) << o.err;
}

TEST(Commands, BadInputExitsWithStatusTwoAndSaysWhy) {
  EXPECT_EQ(run({}).status, 2);
  expect_refused(
      {"fly"},
      "unknown command 'fly'; known: advise, calibrate, comm, data, jobs, plan, profile, simulate, stalls, train");
  expect_refused({"train", "--planner", "rotor"},
                 "unknown planner 'rotor'; known: all, joint, mimose, none, optimal, sqrt, static, swap");
  expect_refused({"train", "--budget", "150%"}, "--budget '150%' is not a valid percentage");
  expect_refused({"train", "--model", "resnet", "--data", "brown"}, "does not fit --data brown");
  expect_refused({"train", "--steps", "-1"}, "--steps -1 is out of range");
  expect_refused({"plan", "--budget", "1MiB"}, "--chain FILE is required");
  expect_refused({"plan", "--chain", "c.json", "--budget", "1MiB", "--slots", "10", "--slot-bytes", "4"},
                 "give --slots N or --slot-bytes N, not both");
  expect_refused({"plan", "--chain", "c.json", "--budget", "1MiB", "--slots", "0"},
                 "--slots 0 is out of range; expected an integer in 1..100000");
  expect_refused({"plan", "--chain", "c.json", "--sweep", "--plot", "curve.pdf"},
                 "plot file 'curve.pdf': expected a name ending in .svg or .png");
  EXPECT_EQ(run({"train", "--help"}).status, 0);
  EXPECT_EQ(run({"plan", "--help"}).status, 0);
  expect_refused({"profile", "--batches", "4,x"}, "'x' is not a batch size");
  expect_refused({"profile", "--method", "swap"},
                 "method 'swap' is unknown; expected none, checkpoint or checkpoint:PLANNER");
  expect_refused({"profile", "--method", "checkpoint:rotor"}, "unknown planner 'rotor'");
  expect_refused({"profile", "--method", "offload"}, "no method left to measure");
  expect_refused({"advise", "--from-csv", "m.csv"}, "--device-memory is required");
  expect_refused({"advise", "--device-memory", "1GiB", "--headroom", "120%"}, "--headroom '120%'");
  expect_refused({"advise", "--device-memory", "lots"}, "--device-memory");
  EXPECT_EQ(run({"profile", "--help"}).status, 0);
  EXPECT_EQ(run({"advise", "--help"}).status, 0);
  expect_refused({"data", "unpack"}, "data: unknown subcommand 'unpack'; known: bench, pack");
  expect_refused({"data", "bench", "--data", "d", "--cache-size", "50%", "--cache-policy", "fifo"},
                 "--cache-policy 'fifo' is not a cache policy; expected lru or minio");
  expect_refused({"data", "bench", "--data", "d", "--cache-policy", "lru"}, "--cache-size is required");
  expect_refused({"data", "pack", "--out", "d"}, "--from is required");
  expect_refused({"data", "pack", "--from", "imagenet", "--out", "d"}, "imagenet");
  expect_refused({"data", "pack", "--from", "brown"}, "--out DIR is required");
  expect_refused({"stalls", "--model", "resnet"}, "stalls: --data must be a directory of image shards");
  expect_refused({"stalls", "--model", "resnet", "--data", ".", "--checks", "50"},
                 "--checks item '50' is not CACHE%:THREADS");
  expect_refused({"stalls", "--model", "resnet", "--data", ".", "--cache-sizes", "0,120"},
                 "--cache-sizes '120' is not a percentage");
  expect_refused({"train", "--model", "resnet", "--data", "/nonexistent/shards"},
                 "--data '/nonexistent/shards' is neither brown, fashion-mnist nor a directory of shards");
  EXPECT_EQ(run({"data", "pack", "--help"}).status, 0);
}

TEST(Commands, MoreThreadsThanCoresAreWarnedAbout) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(cores + 1);
  const Outcome o = run({"train", "--steps", "1", "--batch", "4", "--budget", "100%", "--threads", threads, "--quiet"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("--threads " + threads + " is more than this machine's " + std::to_string(cores) + " cores"),
            std::string::npos)
      << o.err;
}

TEST(Commands, FlagsThatCannotWorkAreRefusedByName) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/not-a-folder";
  std::ofstream(file) << "x";
  // An unknown flag is unknown wherever it stands; a known one given last lacks its value.
  expect_refused({"train", "--steps", "2", "--frobnicate"}, "train: unknown flag --frobnicate");
  expect_refused({"train", "--frobnicate", "--steps", "2"}, "train: unknown flag --frobnicate");
  expect_refused({"train", "--steps"}, "train: flag --steps needs a value");
  expect_refused({"train", "--checkpoint-dir", dir.path()},
                 "writes nothing and reads nothing alone; give --checkpoint-every K");
  expect_refused({"train", "--planner", "mimose", "--bandwidth", "25GB/s"}, "planner mimose never copies");
  expect_refused({"plan", "--chain", dir.path(), "--budget", "1MiB"}, "is a folder; expected a JSON file");
  expect_refused({"train", "--budget", "1.5"}, "--budget '1.5' is 1.5 bytes, not a whole number");
  const Outcome o = run({"train", "--steps", "1", "--checkpoint-dir", file, "--checkpoint-every", "1"});
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_NE(o.err.find("--checkpoint-dir " + file + " is not a folder"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("Exception raised from"), std::string::npos) << o.err;  // no c10 backtrace
}

TEST(Commands, DataPackWritesShardsOfTheRealDatasets) {
  testing::TempDir dir;
  ASSERT_EQ(run({"data", "pack", "--from", "fashion-mnist", "--out", dir.path() + "/fm", "--resolution", "64",
                 "--limit", "50", "--shard-size", "32KiB"})
                .status,
            0);
  std::int64_t images = 0;
  for (int k = 0; std::filesystem::exists(dir.path() + "/fm/fashion-mnist-train-00000" + std::to_string(k) + ".tar");
       ++k) {
    images += static_cast<std::int64_t>(
        data::read_tar_shard(dir.path() + "/fm/fashion-mnist-train-00000" + std::to_string(k) + ".tar").size());
  }
  EXPECT_EQ(images, 50);
  ASSERT_EQ(run({"data", "pack", "--from", "brown", "--out", dir.path() + "/brown", "--limit", "20"}).status, 0);
  const auto sentences = data::read_tar_shard(dir.path() + "/brown/brown-000000.tar");
  ASSERT_EQ(sentences.size(), 20u);
  EXPECT_GT(sentences[0].files.at("txt").size(), 0u);

  // data bench over the packed images: the JSON the issue names.
  const std::string report = dir.path() + "/bench.json";
  ASSERT_EQ(run({"data", "bench", "--data", dir.path() + "/fm", "--cache-size", "50%", "--cache-policy", "minio",
                 "--epochs", "2", "--json", report})
                .status,
            0);
  const json j = read_json(report);
  ASSERT_EQ(j["epochs"].size(), 2u);
  for (const char* key : {"storage_bytes_read", "hit_rate", "seconds"})
    EXPECT_TRUE(j["epochs"][1].contains(key)) << key;
  EXPECT_EQ(j["epochs"][0]["storage_bytes_read"], j["dataset_bytes"]);
  EXPECT_GT(j["epochs"][1]["hit_rate"].get<double>(), 0.3);
}

TEST(Commands, MissingDataIsAFailureNamingThePath) {
  const Outcome o = run({"train", "--data-dir", "/nonexistent/brown", "--steps", "1"});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("'/nonexistent/brown' cannot be opened"), std::string::npos) << o.err;
}

TEST(Commands, PlanWritesTheScheduleAndItsCost) {
  testing::TempDir dir;
  const std::string chain = dir.path() + "/chain.json";
  write_chain_file(testing::random_chain(10, 4), chain);
  const std::string out = dir.path() + "/plan.json";
  ASSERT_EQ(run({"plan", "--chain", chain, "--budget", "60%", "--planner", "mimose", "--json", out}).status, 0);
  const json j = read_json(out);
  EXPECT_TRUE(j["feasible"].get<bool>());
  EXPECT_LE(j["peak_bytes"].get<long long>(), j["budget_bytes"].get<long long>());
  EXPECT_GT(j["time"].get<double>(), 0);
  EXPECT_GE(j["schedule"].size(), 21u);

  ASSERT_EQ(run({"plan", "--chain", chain, "--budget", "100", "--planner", "all", "--json", out}).status, 0);
  const json k = read_json(out);
  EXPECT_FALSE(k["feasible"].get<bool>());
  EXPECT_GT(k["min_budget_bytes"].get<long long>(), 100);
}

TEST(Commands, PlanOptimalWithExactSlotsFitsAndIsNoSlowerThanMimose) {
  testing::TempDir dir;
  const std::string chain = dir.path() + "/chain.json";
  write_chain_file(testing::random_chain(10, 4), chain);
  const std::string a = dir.path() + "/optimal.json", b = dir.path() + "/mimose.json";
  ASSERT_EQ(run({"plan", "--chain", chain, "--budget", "45%", "--planner", "optimal", "--slot-bytes", "1", "--json", a})
                .status,
            0);
  ASSERT_EQ(run({"plan", "--chain", chain, "--budget", "45%", "--planner", "mimose", "--json", b}).status, 0);
  const json o = read_json(a), m = read_json(b);
  ASSERT_TRUE(o["feasible"].get<bool>());
  EXPECT_LE(o["peak_bytes"].get<long long>(), o["budget_bytes"].get<long long>());
  if (m["feasible"].get<bool>()) {
    EXPECT_LE(o["time"].get<double>(), m["time"].get<double>());
  }
}

TEST(Commands, SimulatePricesASwapPlanWithItsTransfers) {
  testing::TempDir dir;
  const std::string chain = dir.path() + "/chain.json", swap = dir.path() + "/swap.json",
                    optimal = dir.path() + "/optimal.json";
  write_chain_file(testing::random_chain(16, 4), chain);
  for (const auto& [planner, out] : {std::pair{"swap", swap}, std::pair{"optimal", optimal}}) {
    const Outcome o = run({"simulate", "--chain", chain, "--planner", planner, "--budget", "55%", "--bandwidth",
                           "1KiB/s", "--json", out});
    ASSERT_EQ(o.status, 0) << o.err;
  }
  const nlohmann::json s = read_json(swap), o = read_json(optimal);
  EXPECT_LE(s["peak_bytes"].get<Bytes>(), s["budget_bytes"].get<Bytes>());
  EXPECT_LE(s["time"].get<double>(), o["time"].get<double>());
  EXPECT_GT(s["swap_bytes"].get<Bytes>(), 0) << "checkpoints of seconds-long stages hide a 1 KiB/s copy";
  EXPECT_EQ(o["swap_bytes"].get<Bytes>(), 0);
  EXPECT_GE(s["hidden_transfer_fraction"].get<double>(), 0);
  EXPECT_LE(s["hidden_transfer_fraction"].get<double>(), 1);
  expect_between_the_two_ways(s);
  expect_refused({"simulate", "--chain", chain, "--budget", "50%", "--bandwidth", "25GB"},
                 "--bandwidth '25GB' is not a bandwidth; expected a size per second such as 25GB/s or 800MiB/s");
  // The Simulator prices split steps only for weight swapping.
  expect_refused({"simulate", "--chain", chain, "--budget", "50%", "--micro-batches", "4"},
                 "it needs --weights-on host");
  // Where the weights live must suit the planner, said before any planning.
  expect_refused({"simulate", "--chain", chain, "--budget", "50%", "--planner", "optimal", "--weights-on", "host"},
                 "planner optimal cannot plan weights in host memory; with --weights-on host expected one of: swap, "
                 "swap-naive");
  expect_refused(
      {"plan", "--chain", chain, "--budget", "50%", "--planner", "swap-naive"},
      "planner swap-naive swaps weights kept in host memory; it needs a chain with \"weights_on_host\": true");
}

// A chain with a reduction is one rank of a data-parallel step: simulate
// plans it for the budget less the reserve and sums each bucket right after
// its last backward, beside the backwards below it.
TEST(Commands, SimulatePricesARanksStepWithItsGradientSums) {
  testing::TempDir dir;
  const std::string chain_path = dir.path() + "/rank.json", out = dir.path() + "/rank-sim.json";
  Chain chain = testing::random_chain(8, 5);
  chain.reduction.buckets = {{5, 1000, 1}, {2, 1000, 1}, {0, 1000, 1}};
  chain.reduction.reserve_bytes = 3000;
  chain.reduction.network = {0.01, 0};
  write_chain_file(chain, chain_path);
  const Outcome o = run({"simulate", "--chain", chain_path, "--planner", "optimal", "--budget", "60%", "--json", out});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("gradient sums over the ranks: 3 buckets"), std::string::npos) << o.out;
  const nlohmann::json j = read_json(out);
  std::vector<int> summed;
  for (const nlohmann::json& op : j["schedule"]) {
    if (op["op"] == "all_reduce") summed.push_back(op["stage"].get<int>());
  }
  EXPECT_EQ(summed, (std::vector<int>{5, 2, 0}));
  EXPECT_LE(j["peak_bytes"].get<Bytes>(), j["budget_bytes"].get<Bytes>()) << "the reserve fits beside the plan";
  // Seconds-long backwards hide the first two 10 ms sums; the last is waited for.
  EXPECT_NEAR(j["reduce_seconds"].get<double>(), 0.03, 1e-9);
  EXPECT_NEAR(j["reduce_stall_seconds"].get<double>(), 0.01, 1e-9);
  expect_refused({"plan", "--chain", chain_path, "--budget", "60%"},
                 "is one rank of a data-parallel job (it has a \"reduction\"); memtrain plan plans one process's "
                 "step: price the rank's step, sums included, with memtrain simulate");
}

TEST(Commands, CalibrateWritesAChainWithTheMeasuredLinkThatSimulateReads) {
  testing::TempDir dir;
  const std::string chain = dir.path() + "/calibrated.json", priced = dir.path() + "/priced.json";
  const Outcome c =
      run({"calibrate", "--json", chain, "--batch", "8", "--copy-bytes", "4MiB", "--repeats", "3", "--threads", "1"});
  ASSERT_EQ(c.status, 0) << c.err;
  const json j = read_json(chain);
  EXPECT_GT(j["device_to_host_bandwidth"].get<double>(), 1e6);
  EXPECT_GT(j["host_to_device_bandwidth"].get<double>(), 1e6);
  EXPECT_EQ(j["stages"].size(), 14u);
  EXPECT_GT(j["stages"][1]["forward_time"].get<double>(), 0);
  EXPECT_EQ(j["copy_bytes"].get<Bytes>(), 4 * MiB);
  EXPECT_TRUE(j.value("updates_inline", false)) << "the CPU build updates host weights on the compute thread";
  const Outcome s = run({"simulate", "--chain", chain, "--planner", "swap", "--budget", "40%", "--json", priced});
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_LE(read_json(priced)["peak_bytes"].get<Bytes>(), read_json(priced)["budget_bytes"].get<Bytes>());
  expect_refused({"calibrate"}, "calibrate: --json FILE is required");
}

TEST(Commands, PlanSweepWritesEveryPlannerAtEveryBudgetAndAPlot) {
  testing::TempDir dir;
  const std::string chain = dir.path() + "/chain.json";
  write_chain_file(testing::random_chain(12, 8), chain);
  const std::string csv = dir.path() + "/sweep.csv", svg = dir.path() + "/sweep.svg";
  const Outcome o = run({"plan", "--chain", chain, "--sweep", "--points", "7", "--csv", csv, "--plot", svg});
  ASSERT_EQ(o.status, 0) << o.err;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "planner,budget_bytes,budget_fraction,feasible,time_seconds,time_over_keep_all,peak_bytes,"
            "recomputed_forwards");
  std::map<std::string, int> rows, feasible;
  std::string previous;
  int runs = 0;  // runs of consecutive rows of one planner: the plot draws a line through each
  while (std::getline(in, line)) {
    const std::string planner = line.substr(0, line.find(','));
    runs += planner != previous;
    previous = planner;
    ++rows[planner];
    feasible[planner] += line.find(",1,") != std::string::npos;
  }
  EXPECT_EQ(rows.size(), plan::device_weight_planner_names().size());
  EXPECT_EQ(runs, static_cast<int>(rows.size())) << "each planner's rows one after another";
  for (const auto& [planner, count] : rows) EXPECT_EQ(count, 7) << planner;
  EXPECT_EQ(feasible["none"], 1);  // only at the top budget
  EXPECT_GE(feasible["optimal"], feasible["mimose"]);
  EXPECT_GE(feasible["optimal"], 6);  // the lowest budget is the least any planner needs
  std::ifstream plot(svg);
  std::string head((std::istreambuf_iterator<char>(plot)), {});
  EXPECT_NE(head.find("<svg"), std::string::npos);
  EXPECT_NE(head.find("optimal"), std::string::npos);
}

TEST(Commands, PlanGraphSolvesTheExampleUNetWithCbc) {
  testing::TempDir dir;
  const std::string out = dir.path() + "/graph.json";
  const char* source = std::getenv("MEMTRAIN_SOURCE_DIR");  // ctest sets it
  ASSERT_NE(source, nullptr) << "run under ctest, or set MEMTRAIN_SOURCE_DIR";
  const std::string example = std::string(source) + "/docs/examples/unet-graph.json";
  const Outcome o = run({"plan", "--graph", example, "--budget", "85%", "--time-limit", "60", "--json", out});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = read_json(out);
  ASSERT_TRUE(j["feasible"].get<bool>());
  EXPECT_TRUE(j["proven_optimal"].get<bool>());
  EXPECT_LE(j["peak_bytes"].get<long long>(), j["budget_bytes"].get<long long>());
  EXPECT_EQ(j["compute"].size(), 18u);  // 9 forward nodes and their backward
  EXPECT_EQ(j["variant"], json(std::vector<int>(18, 0))) << "the example's nodes have no variants";
  EXPECT_GT(j["time"].get<double>(), 54.0) << "54 s is the time with nothing recomputed; 85% needs some";
  EXPECT_EQ(run({"plan", "--graph", example, "--chain", example, "--budget", "1"}).status, 2);
}

// As people run it, with the progress bar (no --quiet): a finished run is
// continued to more steps from its checkpoint, and ends with the parameters
// of a run that took all those steps at once.
TEST(Commands, AFinishedRunContinuesFromItsCheckpointWithTheProgressBar) {
  testing::TempDir dir;
  const std::vector<std::string> small = {"train", "--layers", "2",    "--width",   "32", "--heads",  "2",   "--batch",
                                          "8",     "--vocab",  "2000", "--threads", "1",  "--budget", "100%"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = small;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string whole = dir.path() + "/whole.json", continued = dir.path() + "/continued.json";
  const std::string checkpoints = dir.path() + "/ckpt";
  ASSERT_EQ(run(with({"--steps", "6", "--json", whole})).status, 0);
  const Outcome first = run(with({"--steps", "4", "--checkpoint-dir", checkpoints, "--checkpoint-every", "2"}));
  ASSERT_EQ(first.status, 0) << first.err;
  const Outcome rest = run(with({"--steps", "6", "--checkpoint-dir", checkpoints, "--resume", "--json", continued}));
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_NE(rest.err.find("step 6/6 [####################]"), std::string::npos) << rest.err;
  EXPECT_EQ(read_json(whole)["parameter_digest"], read_json(continued)["parameter_digest"]);
}

// The real thing, small: Brown, a two-layer tagger, a few steps.
TEST(Commands, TrainWritesItsReportAndTheMeasuredChain) {
  testing::TempDir dir;
  const std::string report = dir.path() + "/train.json", chain = dir.path() + "/chain.json";
  const Outcome o = run({"train", "--layers",  "2",    "--width", "32",   "--heads",         "2",   "--batch",
                         "16",    "--vocab",   "2000", "--steps", "7",    "--collect-steps", "2",   "--budget",
                         "65%",   "--threads", "1",    "--json",  report, "--save-chain",    chain, "--quiet"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = read_json(report);
  EXPECT_EQ(j["planner"], "mimose");
  EXPECT_EQ(j["cpu_threads"], 1) << "--threads 1";
  // LibTorch on Debian loads a BLAS for its matrix products; the report names the file.
  ASSERT_TRUE(j["blas_library"].is_string()) << j["blas_library"].dump();
  EXPECT_EQ(j["blas_library"], cli::blas_name(cli::loaded_blas_library()));
  ASSERT_EQ(j["steps"].size(), 7u);
  const auto& s0 = j["steps"][0];
  for (const char* key : {"step", "input_size", "plan", "predicted_peak_bytes", "peak_bytes", "seconds", "loss"}) {
    EXPECT_TRUE(s0.contains(key)) << key;
  }
  EXPECT_EQ(s0["plan"], "collect");
  EXPECT_NE(j["steps"][6]["plan"], "collect");
  for (const auto& s : j["steps"]) EXPECT_LE(s["peak_bytes"].get<long long>(), j["budget_bytes"].get<long long>());
  const json& sum = j["summary"];
  for (const char* key :
       {"max_peak_bytes", "violations", "retries", "cache_hits", "median_prediction_error", "mean_step_seconds"}) {
    EXPECT_TRUE(sum.contains(key)) << key;
  }
  EXPECT_EQ(sum["violations"], 0);
  const Chain c = read_chain_file(chain);
  EXPECT_EQ(c.size(), 6);
  EXPECT_EQ(c.stages[0].name, "embed");
  EXPECT_EQ(c.stages[0].input_bytes, 16 * 180 * (8 + 8 + 1)) << "the batch of the 16 longest sentences";
  EXPECT_EQ(c.stages[0].param_bytes, (2000 + 180) * 32 * 4);
}

// memtrain jobs reads each job's own --json report into what it needs.
TEST(Commands, AJobsRunReportIsReadFromTheTrainReport) {
  testing::TempDir dir;
  const std::string report = dir.path() + "/train.json";
  const Outcome o =
      run({"train", "--steps", "3", "--batch", "4", "--budget", "100%", "--threads", "1", "--json", report, "--quiet"});
  ASSERT_EQ(o.status, 0) << o.err;
  const std::optional<jobs::JobRunReport> r = read_job_run_report(report);
  ASSERT_TRUE(r.has_value());
  const json j = read_json(report);
  EXPECT_EQ(r->threads, 1);
  ASSERT_EQ(r->steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r->steps[i].samples, 4) << i;
    EXPECT_EQ(r->steps[i].collection, j["steps"][i]["plan"] == "collect") << i;
    EXPECT_EQ(r->steps[i].peak_bytes, j["steps"][i]["peak_bytes"].get<double>()) << i;
    EXPECT_FALSE(r->steps[i].predicted_plain_seconds.has_value()) << "priced on a shared device only";
  }
  EXPECT_EQ(r->retries, j["summary"]["retries"].get<long>());
  EXPECT_EQ(r->violations, j["summary"]["violations"].get<long>());
  // No report, or a file that is not one: nothing read.
  EXPECT_FALSE(read_job_run_report(dir.path() + "/none.json").has_value());
  std::ofstream(dir.path() + "/other.json") << R"({"steps": 3})";
  EXPECT_FALSE(read_job_run_report(dir.path() + "/other.json").has_value());
}

TEST(Commands, TrainsAUNetWithTheGraphPlanner) {
  testing::TempDir dir;
  const std::string report = dir.path() + "/unet.json";
  const Outcome o =
      run({"train", "--model",   "unet", "--width",  "4",   "--image-size", "16", "--batch", "8",    "--steps",
           "3",     "--threads", "2",    "--budget", "90%", "--time-limit", "20", "--json",  report, "--quiet"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("planner checkmate (CBC)"), std::string::npos) << o.err;
  const json j = read_json(report);
  ASSERT_EQ(j["steps"].size(), 3u);
  const json& sum = j["summary"];
  EXPECT_LT(sum["budget_bytes"].get<Bytes>(), sum["keep_everything_peak_bytes"].get<Bytes>());
  EXPECT_LE(sum["planned_peak_bytes"].get<Bytes>(), sum["budget_bytes"].get<Bytes>());
  for (const auto& s : j["steps"]) {
    EXPECT_EQ(s["planned_peak_bytes"], sum["planned_peak_bytes"]) << "one size, one plan";
    EXPECT_TRUE(std::isfinite(s["loss"].get<double>()));
  }
  // The largest input (the only size here) is planned before the first step:
  // N% is of its step keeping everything, and no step plans anew.
  EXPECT_EQ(sum["reference_peak_bytes"], sum["keep_everything_peak_bytes"]);
  EXPECT_EQ(sum["budget_bytes"].get<Bytes>(), sum["reference_peak_bytes"].get<Bytes>() * 9 / 10);
  EXPECT_FALSE(sum["per_size_prediction"].get<bool>());
  EXPECT_TRUE(sum["enforced"].get<bool>());
  long retries = 0;
  for (const auto& s : j["steps"]) {
    EXPECT_FALSE(s["new_plan"].get<bool>());
    EXPECT_FALSE(s["violation"].get<bool>()) << "enforced";
    retries += s["retries"].get<long>();
  }
  EXPECT_EQ(sum["retries"].get<long>(), retries);
  EXPECT_NE(o.err.find("(90% of the largest input's step keeping everything"), std::string::npos) << o.err;
  expect_refused(
      {"train", "--model", "unet", "--planner", "optimal"},
      "--model unet is a graph, not a chain; it is planned by the graph planner: expected --planner checkmate");
  expect_refused({"train", "--model", "unet", "--layers", "3", "--image-size", "20"},
                 "--image-size 20 must be divisible by 2^3");
  // A budget no schedule fits is a failure, not bad usage: exit status 1.
  const Outcome tight =
      run({"train", "--model", "unet", "--width", "4", "--image-size", "16", "--batch", "8", "--budget", "10%"});
  EXPECT_EQ(tight.status, 1) << tight.err;
  EXPECT_NE(tight.err.find("fits the budget"), std::string::npos) << tight.err;
  EXPECT_NE(tight.err.find("the budget must be larger"), std::string::npos) << tight.err;
}

TEST(Commands, TrainsAGptWithItsWeightsInHostMemory) {
  testing::TempDir dir;
  const std::string report = dir.path() + "/train.json";
  const Outcome o = run({"train", "--model",   "gpt",  "--layers",  "2",    "--width",      "128",  "--heads",
                         "2",     "--vocab",   "2000", "--batch",   "8",    "--steps",      "4",    "--collect-steps",
                         "2",     "--threads", "2",    "--planner", "swap", "--weights-on", "host", "--micro-batches",
                         "4",     "--budget",  "50%",  "--json",    report, "--quiet"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("weights, gradients and Adam state in host memory"), std::string::npos) << o.err;
  // No --bandwidth or --calibration: the link is measured, not refused.
  EXPECT_NE(o.err.find("host link measured (no --bandwidth or --calibration)"), std::string::npos) << o.err;
  const json j = read_json(report);
  EXPECT_EQ(j["weights_on_host"], true);
  EXPECT_EQ(j["micro_batches"], 4);
  for (const auto& s : j["steps"]) {
    EXPECT_GT(s["weight_swap_bytes"].get<Bytes>(), 0);
    EXPECT_EQ(s["swap_bytes"].get<Bytes>(), s["to_host_bytes"].get<Bytes>() + s["to_device_bytes"].get<Bytes>());
    expect_between_the_two_ways(s);
    EXPECT_LE(s["peak_bytes"].get<Bytes>(), j["budget_bytes"].get<Bytes>());
    EXPECT_NE(s["schedule"].get<std::string>().find("U3"), std::string::npos) << "the update is in the schedule";
  }
  const json& sum = j["summary"];
  EXPECT_EQ(sum["violations"], 0);
  EXPECT_GT(sum["swap_bytes_per_step"].get<double>(), 0);
  EXPECT_GT(sum["weight_swap_bytes_per_step"].get<double>(), 0);
  EXPECT_EQ(sum["collection_steps"], 2);
  EXPECT_GT(sum["to_host_bandwidth"].get<double>(), 0);
  EXPECT_GT(sum["to_host_bytes_per_step"].get<double>(), 0);
  EXPECT_NEAR(sum["to_host_bytes_per_step"].get<double>() + sum["to_device_bytes_per_step"].get<double>(),
              sum["swap_bytes_per_step"].get<double>(), 1.0);
  EXPECT_GE(sum["hidden_transfer_fraction"].get<double>(), 0);
  EXPECT_LE(sum["hidden_transfer_fraction"].get<double>(), 1);
  expect_between_the_two_ways(sum);
  expect_refused({"train", "--model", "gpt", "--planner", "swap-naive", "--bandwidth", "25GB/s"},
                 "planner swap-naive swaps weights kept in host memory; it needs --weights-on host");
  expect_refused({"train", "--model", "gpt", "--planner", "optimal", "--weights-on", "host", "--bandwidth", "25GB/s"},
                 "expected one of: swap, swap-naive");
}

// `stalls` on a small packed dataset: the fields the issue names, consistent
// with each other (the timings themselves are this machine's).
TEST(Commands, StallsMeasuresTheThreeEpochsPredictsAndChecks) {
  testing::TempDir dir;
  const std::string shards = dir.path() + "/fm";
  ASSERT_EQ(
      run({"data", "pack", "--from", "fashion-mnist", "--out", shards, "--resolution", "64", "--limit", "96"}).status,
      0);
  const std::string report = dir.path() + "/stalls.json";
  const Outcome o =
      run({"stalls",   "--model",       "resnet", "--width",     "4",         "--layers",    "1",   "--data",
           shards,     "--batch",       "16",     "--min-scale", "16",        "--max-scale", "24",  "--cache-sizes",
           "0,50,100", "--max-threads", "3",      "--checks",    "0:1,100:2", "--json",      report});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = read_json(report);
  EXPECT_EQ(j["samples"], 96);
  for (const char* key : {"ingestion_rate", "prep_rate", "fetch_rate"}) EXPECT_GT(j[key].get<double>(), 0) << key;
  EXPECT_NEAR(j["ingestion_rate"].get<double>() * j["synthetic_epoch_seconds"].get<double>(), 96, 1e-6);
  EXPECT_GE(j["stall_order_noise_seconds"].get<double>(), 0);
  for (const char* key : {"fetch_stall_fraction", "prep_stall_fraction"}) {
    EXPECT_GE(j[key].get<double>(), 0) << key;
    EXPECT_LE(j[key].get<double>(), 1) << key;
  }
  EXPECT_LE(j["fetch_stall_fraction"].get<double>() + j["prep_stall_fraction"].get<double>(), 1 + 1e-9);
  ASSERT_EQ(j["what_if"].size(), 9u);
  EXPECT_EQ(j["what_if"][4]["cache_fraction"], 0.5);
  EXPECT_EQ(j["what_if"][4]["prep_threads"], 2);
  ASSERT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(j["checks"][1]["predicted"]["prep_threads"], 2);
  EXPECT_GT(j["checks"][1]["measured_epoch_seconds"].get<double>(), 0);
}

// Training from packed shards through the input pipeline: a corrupt sample
// stops the run naming where it is, or with --skip-corrupt is counted and
// reported while every other sample of the epoch is trained on.
TEST(Commands, TrainsFromPackedShardsAndSkipsACorruptSampleWhenAsked) {
  testing::TempDir dir;
  const std::string shards = dir.path() + "/fm";
  ASSERT_EQ(run({"data", "pack", "--from", "fashion-mnist", "--out", shards, "--resolution", "64", "--limit", "40",
                 "--shard-size", "48KiB"})
                .status,
            0);
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(shards)) paths.push_back(e.path().string());
  testing::change_sample(paths, "000013", [](auto& files) { files["jpg"].resize(25); });
  const std::vector<std::string> train = {"train", "--model",      "resnet", "--width",     "4",   "--data",
                                          shards,  "--batch",      "8",      "--min-scale", "16",  "--max-scale",
                                          "40",    "--epochs",     "1",      "--budget",    "90%", "--prep-threads",
                                          "3",     "--cache-size", "50%",    "--threads",   "1",   "--quiet"};
  const Outcome strict = run(train);
  EXPECT_EQ(strict.status, 1);
  EXPECT_NE(strict.err.find("(sample 000013)"), std::string::npos) << strict.err;
  EXPECT_NE(strict.err.find("at byte offset"), std::string::npos) << strict.err;

  const std::string report = dir.path() + "/train.json";
  std::vector<std::string> lenient = train;
  for (const char* extra : {"--skip-corrupt", "--json"}) lenient.push_back(extra);
  lenient.push_back(report);
  const Outcome o = run(lenient);
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = read_json(report);
  EXPECT_EQ(j["data"], shards);
  EXPECT_EQ(j["steps"].size(), 5u);
  EXPECT_EQ(j["input_pipeline"]["skipped_corrupt"], 1);
  EXPECT_EQ(j["input_pipeline"]["samples_delivered"], 39);
  ASSERT_EQ(j["input_pipeline"]["skipped"].size(), 1u);
  EXPECT_NE(j["input_pipeline"]["skipped"][0].get<std::string>().find("000013"), std::string::npos);
  long long images = 0;
  for (const auto& s : j["steps"]) {
    images += s["input_shape"][0].get<long long>();
    EXPECT_GE(s["data_wait_seconds"].get<double>(), 0);
  }
  EXPECT_EQ(images, 39);
  EXPECT_TRUE(j["summary"].contains("data_wait_fraction"));
}

}  // namespace
}  // namespace memtrain::cli

namespace memtrain::cli {
namespace {

// The image path end to end: Fashion-MNIST resized per batch, a small ResNet.
TEST(Commands, TrainsTheResNetOnFashionMnistWithChangingImageSizes) {
  testing::TempDir dir;
  const std::string report = dir.path() + "/train.json";
  const Outcome o = run({"train",       "--model",  "resnet",      "--width", "4",       "--batch", "8",
                         "--min-scale", "20",       "--max-scale", "48",      "--steps", "8",       "--collect-steps",
                         "2",           "--budget", "90%",         "--json",  report,    "--quiet"});
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = read_json(report);
  EXPECT_EQ(j["model"], "resnet");
  EXPECT_EQ(j["largest_input_shape"], json::array({8, 1, 48, 48}));
  std::set<long long> sizes;
  for (const auto& s : j["steps"]) {
    sizes.insert(s["input_size"].get<long long>());
    EXPECT_EQ(s["input_shape"][2], s["input_shape"][3]);
    EXPECT_LE(s["peak_bytes"].get<long long>(), j["budget_bytes"].get<long long>());
  }
  EXPECT_GT(sizes.size(), 3u);
  EXPECT_EQ(j["summary"]["violations"], 0);
}

}  // namespace
}  // namespace memtrain::cli

namespace memtrain::cli {
namespace {

// A small tagger on sentences of at most 24 tokens: quick to profile.
const std::vector<std::string> kSmallTagger = {"--layers",  "1",    "--width",      "32", "--heads",       "2",
                                               "--vocab",   "2000", "--max-length", "24", "--timed-steps", "3",
                                               "--threads", "1"};

std::vector<std::string> with_small_tagger(std::vector<std::string> args) {
  args.insert(args.end(), kSmallTagger.begin(), kSmallTagger.end());
  return args;
}

TEST(Commands, ProfileMeasuresEachMethodAtEachBatchAndSkipsWhatIsNotBuilt) {
  testing::TempDir dir;
  const std::string csv = dir.path() + "/p.csv", report = dir.path() + "/p.json";
  const Outcome o = run(with_small_tagger(
      {"profile", "--method", "none,offload,checkpoint", "--batches", "8,2,4,6", "--csv", csv, "--json", report}));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("skipping method offload: offload is not built yet"), std::string::npos) << o.err;
  const std::vector<predict::Measurement> rows = predict::read_measurements_csv_file(csv);
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(predict::method_names(rows), (std::vector<std::string>{"none", "checkpoint"}));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i].batch, 2 * static_cast<std::int64_t>(i + 1)) << "batches in increasing order";
    EXPECT_EQ(rows[i + 4].batch, rows[i].batch);
    EXPECT_GT(rows[i].step_seconds, 0);
    if (i > 0) {
      EXPECT_GT(rows[i].peak_bytes, rows[i - 1].peak_bytes) << "none's peak grows with the batch";
    }
  }
  EXPECT_LT(rows[7].peak_bytes, rows[3].peak_bytes) << "checkpointing peaks lower at batch 8";
  const json j = read_json(report);
  ASSERT_EQ(j["measurements"].size(), 8u);
  EXPECT_EQ(j["measurements"][0]["timed_step_seconds"].size(), 3u);
  EXPECT_EQ(j["measurements"][3]["input"], "8x24");
}

TEST(Commands, AdviseFromCsvWritesTheFittedModelsTheAdviceAndAPlot) {
  testing::TempDir dir;
  const std::string csv = dir.path() + "/m.csv", report = dir.path() + "/a.json", plot = dir.path() + "/a.svg";
  {
    // none: 100 MiB + 10 MiB/sample, saturated from batch 40; checkpoint: 2 MiB/sample, 30% slower per sample.
    std::ofstream out(csv);
    out << "method,batch,peak_bytes,step_seconds\n";
    for (int b : {8, 16, 32, 48, 64}) {
      out << "none," << b << ',' << (100 + 10 * b) * MiB << ',' << std::max(0.4, 0.01 * b) + 0.05 << '\n';
      out << "checkpoint," << b << ',' << (100 + 2 * b) * MiB << ',' << std::max(0.52, 0.013 * b) + 0.05 << '\n';
    }
    out << "compress,8," << 50 * MiB << ",0.3\n";  // too few to fit: left out, not fatal
  }
  const Outcome o = run(
      {"advise", "--from-csv", csv, "--device-memory", "400MiB", "--headroom", "0%", "--json", report, "--plot", plot});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("method compress: 1 measurements are too few"), std::string::npos) << o.err;
  const json j = read_json(report);
  ASSERT_EQ(j["methods"].size(), 2u);
  for (const char* key : {"method", "r2_memory", "r2_time", "alpha", "beta", "a", "k", "c", "max_batch",
                          "predicted_peak_bytes", "predicted_throughput"}) {
    EXPECT_TRUE(j["methods"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["methods"][0]["max_batch"], 30);   // (400 - 100) / 10: 30 / 0.45 s = 67 samples/s
  EXPECT_EQ(j["methods"][1]["max_batch"], 150);  // (400 - 100) / 2: 150 / 2.0 s = 75 samples/s
  EXPECT_NEAR(j["methods"][1]["k"].get<double>(), 0.013, 1e-6);
  EXPECT_GT(j["methods"][0]["r2_time"].get<double>(), 0.9999);
  EXPECT_EQ(j["recommended"], "checkpoint");
  EXPECT_NE(j["reason"].get<std::string>().find(
                "grow 5.0x (30 -> 150) over none, and none saturates the device from batch 40"),
            std::string::npos)
      << j["reason"];
  std::ifstream svg(plot);
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("checkpoint predicted"), std::string::npos);

  std::ofstream(csv) << "method,batch,peak_bytes,step_seconds\nnone,4,100,0.1\nnone,8,200,0.2\n";
  const Outcome few = run({"advise", "--from-csv", csv, "--device-memory", "1GiB"});
  EXPECT_EQ(few.status, 1);
  EXPECT_NE(few.err.find("no method has enough measurements"), std::string::npos) << few.err;
}

TEST(Commands, AdviseMeasuresHereAndValidatesItsPrediction) {
  testing::TempDir dir;
  const std::string report = dir.path() + "/a.json";
  const Outcome o = run(with_small_tagger({"advise", "--batches", "4,8,12,16", "--device-memory", "40MiB", "--json",
                                           report, "--plot", dir.path() + "/a.svg", "--validate"}));
  ASSERT_EQ(o.status, 0) << o.err;
  const json j = read_json(report);
  ASSERT_EQ(j["methods"].size(), 2u);
  ASSERT_EQ(j["validation"].size(), 2u);
  for (const json& v : j["validation"]) {
    const double predicted = v["predicted_peak_bytes"].get<double>(), measured = v["measured_peak_bytes"].get<double>();
    EXPECT_NEAR(predicted / measured, 1.0, 0.10) << v;
    EXPECT_GT(v["measured_throughput"].get<double>(), 0) << v;
  }
  EXPECT_GT(j["methods"][1]["max_batch"].get<long long>(), j["methods"][0]["max_batch"].get<long long>())
      << "checkpointing fits a larger batch";
}

}  // namespace
}  // namespace memtrain::cli
