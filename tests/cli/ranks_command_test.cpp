// `memtrain train` with ranks end to end: real rank processes meeting over
// loopback through c10d, against one process on the same global batches.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/comm/rank_group.h"
#include "support/memtrain_runs.h"
#include "support/temp_dir.h"

namespace memtrain {
namespace {

using nlohmann::json;
using testing::json_of;
using testing::losses;
using testing::memtrain;
using testing::text_of;
using Clock = std::chrono::steady_clock;

// The tagger under half its peak (stages recomputed), one compute thread per
// process: the comparisons need the same kernels' threads on both sides.
const std::string kRun = "train --steps 5 --threads 1 --planner optimal --quiet";

TEST(RanksCommand, DeterministicRanksEqualOneProcessWithMicroBatchesBitForBit) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log";
  for (int n : {2, 3}) {
    const std::string ranks = dir.path() + "/ranks.json", micro = dir.path() + "/micro.json";
    ASSERT_EQ(
        memtrain(kRun + " --batch 4 --ranks " + std::to_string(n) + " --deterministic-reduce --json " + ranks, log), 0)
        << text_of(log);
    ASSERT_EQ(memtrain(kRun + " --batch " + std::to_string(4 * n) + " --micro-batches " + std::to_string(n) +
                           " --json " + micro,
                       log),
              0)
        << text_of(log);
    const json r = json_of(ranks), m = json_of(micro);
    EXPECT_EQ(r.at("world").get<int>(), n);
    EXPECT_EQ(losses(r), losses(m)) << n << " ranks";  // exact: dropout included
    EXPECT_EQ(r.at("parameter_digest"), m.at("parameter_digest")) << n << " ranks";
    // Every rank ends with the same weights.
    for (int k = 1; k < n; ++k) {
      const json other = json_of(ranks + ".rank" + std::to_string(k));
      EXPECT_EQ(other.at("rank").get<int>(), k);
      EXPECT_EQ(other.at("parameter_digest"), r.at("parameter_digest"));
      EXPECT_EQ(losses(other), losses(r));
    }
  }
}

// Harmony per rank: each rank swaps its weights in and sends its summed
// gradients to the host, stage by stage; two ranks of one micro-batch each
// train bit for bit as one process running their slices as two micro-batches.
TEST(RanksCommand, RanksWithWeightsInHostMemoryEqualOneProcessBitForBit) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", ranks = dir.path() + "/r.json", one = dir.path() + "/one.json";
  const std::string run = "train --steps 6 --threads 1 --weights-on host --planner swap --budget 40% --quiet";
  ASSERT_EQ(memtrain(run + " --ranks 2 --deterministic-reduce --batch 4 --json " + ranks, log), 0) << text_of(log);
  ASSERT_EQ(memtrain(run + " --batch 8 --micro-batches 2 --json " + one, log), 0) << text_of(log);
  const json r = json_of(ranks), o = json_of(one);
  EXPECT_TRUE(r.at("weights_on_host").get<bool>());
  EXPECT_EQ(losses(r), losses(o));
  EXPECT_EQ(r.at("parameter_digest"), o.at("parameter_digest"));
  EXPECT_EQ(json_of(ranks + ".rank1").at("parameter_digest"), o.at("parameter_digest"));
  for (const json& step : r.at("steps")) {
    const std::string schedule = step.at("schedule").get<std::string>();
    EXPECT_NE(schedule.find("AR0"), std::string::npos) << schedule;  // every stage's gradients summed
  }
}

TEST(RanksCommand, RingSummedRanksMatchOneProcessOnTheConcatenatedBatch) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", ranks = dir.path() + "/r.json", one = dir.path() + "/one.json";
  // No dropout: the single process draws its masks over the whole batch.
  ASSERT_EQ(memtrain(kRun + " --dropout 0 --budget 65% --batch 4 --ranks 3 --json " + ranks, log), 0) << text_of(log);
  ASSERT_EQ(memtrain(kRun + " --dropout 0 --budget 65% --batch 12 --json " + one, log), 0) << text_of(log);
  const std::vector<double> a = losses(json_of(ranks)), b = losses(json_of(one));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * std::abs(b[i])) << "step " << i + 1;
}

TEST(RanksCommand, AShardedOptimizerUpdatesBitForBitTheSameWithAThirdOfTheState) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", whole = dir.path() + "/whole.json", sharded = dir.path() + "/s.json";
  const std::string run = kRun + " --batch 2 --ranks 3 --deterministic-reduce --budget 100%";
  ASSERT_EQ(memtrain(run + " --json " + whole, log), 0) << text_of(log);
  ASSERT_EQ(memtrain(run + " --shard-optimizer --checkpoint-dir " + dir.path() + "/ckpt --checkpoint-every 5 --json " +
                         sharded,
                     log),
            0)
      << text_of(log);
  const json w = json_of(whole);
  const auto state = [](const json& j) { return j.at("summary").at("optimizer_state_bytes").get<double>(); };
  double total = 0;
  for (int r = 0; r < 3; ++r) {
    const json s = json_of(r == 0 ? sharded : sharded + ".rank" + std::to_string(r));
    EXPECT_TRUE(s.at("shard_optimizer").get<bool>());
    EXPECT_EQ(s.at("parameter_digest"), w.at("parameter_digest")) << "rank " << r;
    EXPECT_EQ(losses(s), losses(w)) << "rank " << r;
    EXPECT_LE(state(s), (1.0 / 3 + 0.05) * state(w)) << "rank " << r;
    total += state(s);
    // The state a rank does not keep is memory it does not use.
    const double saved = state(w) - state(s);
    EXPECT_LE(s.at("reference_peak_bytes").get<double>(), w.at("reference_peak_bytes").get<double>() - 0.9 * saved)
        << "rank " << r;
  }
  EXPECT_EQ(total, state(w));  // every element's moments kept once

  // A shard's checkpoint is that rank's: resuming without the shard is refused, saying why.
  EXPECT_NE(memtrain(run + " --checkpoint-dir " + dir.path() + "/ckpt --resume", log), 0);
  EXPECT_NE(text_of(log).find("optimizer shard; this run keeps the whole optimizer state"), std::string::npos)
      << text_of(log);
}

pid_t start(const std::string& args, const std::string& log) {
  const pid_t pid = testing::start_memtrain(args, log);
  EXPECT_GT(pid, 0) << "cannot start memtrain " << args;
  return pid;
}

TEST(RanksCommand, AKilledRankIsNamedByEveryOtherRankWithinTwiceTheTimeout) {
  testing::TempDir dir;
  const int port = runtime::free_loopback_port();
  const double timeout = 10;
  const std::string common =
      "train --steps 100000 --batch 2 --threads 1 --max-length 40 --budget 100% --quiet --world 3 --master "
      "127.0.0.1:" +
      std::to_string(port) + " --timeout 10 --checkpoint-every 1 --checkpoint-dir " + dir.path() + "/ckpt";
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r)
    pids.push_back(start(common + " --rank " + std::to_string(r), dir.path() + "/" + std::to_string(r)));
  // Once the ranks have met and trained (rank 1's first checkpoint is
  // written only after every rank's), kill rank 1 mid-run. Loading the
  // corpus takes a while on a loaded machine: wait for it, not for a time.
  const std::string trained = dir.path() + "/ckpt/memtrain-rank1.ckpt";
  for (int i = 0; i < 2400 && ::access(trained.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::access(trained.c_str(), F_OK), 0) << text_of(dir.path() + "/0");
  ::kill(pids[1], SIGKILL);
  const Clock::time_point killed = Clock::now();
  for (int r : {0, 2}) {
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    const double after = std::chrono::duration<double>(Clock::now() - killed).count();
    const std::string log = text_of(dir.path() + "/" + std::to_string(r));
    ASSERT_TRUE(WIFEXITED(status)) << log;
    EXPECT_NE(WEXITSTATUS(status), 0) << log;
    EXPECT_NE(log.find("rank 1 died or stopped"), std::string::npos) << log;
    EXPECT_LT(after, 2 * timeout) << log;
  }
  ::waitpid(pids[1], nullptr, 0);
}

// A rank killed mid-run, the job resumed from its last checkpoint: it ends
// with the parameters of a run never interrupted.
TEST(RanksCommand, AJobResumedAfterAKilledRankEndsAsAnUninterruptedOne) {
  testing::TempDir dir;
  const std::string small = " --steps 30 --batch 2 --threads 1 --max-length 40 --budget 100% --quiet";
  const std::string whole = dir.path() + "/whole.json", resumed = dir.path() + "/resumed.json";
  const std::string log = dir.path() + "/log", checkpoints = dir.path() + "/ckpt";
  ASSERT_EQ(memtrain("train --ranks 2 --deterministic-reduce" + small + " --json " + whole, log), 0) << text_of(log);

  const int port = runtime::free_loopback_port();
  const std::string common =
      "train --world 2 --deterministic-reduce --timeout 10 --master 127.0.0.1:" + std::to_string(port) + small +
      " --checkpoint-dir " + checkpoints + " --checkpoint-every 2";
  const pid_t r0 = start(common + " --rank 0", dir.path() + "/0");
  const pid_t r1 = start(common + " --rank 1", dir.path() + "/1");
  const std::string first = checkpoints + "/memtrain-rank1.ckpt";
  for (int i = 0; i < 1200 && ::access(first.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::access(first.c_str(), F_OK), 0) << text_of(dir.path() + "/0");
  ::kill(r1, SIGKILL);
  int s0 = 0;
  ::waitpid(r0, &s0, 0);
  ::waitpid(r1, nullptr, 0);
  const std::string log0 = text_of(dir.path() + "/0");
  if (log0.find("30 steps") == std::string::npos) {  // rank 1 died before the job's end
    EXPECT_NE(WEXITSTATUS(s0), 0) << log0;
    EXPECT_NE(log0.find("rank 1"), std::string::npos) << log0;
  }

  ASSERT_EQ(memtrain("train --ranks 2 --deterministic-reduce" + small + " --checkpoint-dir " + checkpoints +
                         " --resume --json " + resumed,
                     log),
            0)
      << text_of(log);
  const json a = json_of(whole), b = json_of(resumed);
  EXPECT_EQ(a.at("parameter_digest"), b.at("parameter_digest"));
  const std::vector<double> la = losses(a), lb = losses(b);
  ASSERT_GT(lb.size(), 0u);
  ASSERT_LT(lb.size(), la.size()) << "the resumed run started after step 1";
  EXPECT_EQ(b.at("steps")[0].at("step").get<long>(), static_cast<long>(la.size() - lb.size()) + 1);
  EXPECT_EQ(std::vector<double>(la.end() - static_cast<long>(lb.size()), la.end()), lb);
}

TEST(RanksCommand, RanksThatDisagreeOrFlagsThatDoNotFitAreRefused) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log";
  // Flags that do not go together: usage errors (status 2) saying why.
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--ranks 2 --rank 0", "--ranks N starts the ranks itself"},
           {"--deterministic-reduce", "are for ranks"},
           {"--shard-optimizer", "are for ranks"},
           {"--rank 0 --world 2", "needs all of --rank R, --world N and --master"},
           {"--rank 0 --world 2 --master nowhere", "is not HOST:PORT"},
           {"--resume", "need --checkpoint-dir D"},
           {"--ranks 2 --weights-on host --planner swap --shard-optimizer",
            "a sharded optimizer (--shard-optimizer) with the weights in host memory (--weights-on host) is not "
            "supported"},
           {"--checkpoint-dir " + dir.path() + " --weights-on host --planner swap",
            "checkpoints (--checkpoint-dir) with the weights in host memory (--weights-on host) is not supported"},
           {"--ranks 2 --share " + dir.path() + "/group",
            "ranks (--ranks, or --world) with a job group (--share) is not supported"}}) {
    EXPECT_EQ(memtrain("train " + args, log), 2) << args;
    EXPECT_NE(text_of(log).find(says), std::string::npos) << args << ": " << text_of(log);
  }

  // Two ranks started by hand with different seeds: both refuse, naming the seed.
  const int port = runtime::free_loopback_port();
  const std::string common =
      "train --steps 2 --batch 2 --threads 1 --max-length 40 --budget 100% --quiet --world 2 --timeout 20 "
      "--master 127.0.0.1:" +
      std::to_string(port);
  const pid_t r0 = start(common + " --rank 0 --seed 1", dir.path() + "/0");
  const pid_t r1 = start(common + " --rank 1 --seed 2", dir.path() + "/1");
  int s0 = 0, s1 = 0;
  ::waitpid(r0, &s0, 0);
  ::waitpid(r1, &s1, 0);
  EXPECT_EQ(WEXITSTATUS(s0), 2) << text_of(dir.path() + "/0");
  EXPECT_NE(text_of(dir.path() + "/0").find("rank 1 has seed 2 but rank 0 has seed 1"), std::string::npos)
      << text_of(dir.path() + "/0");
  EXPECT_NE(WEXITSTATUS(s1), 0);
}

// CoorDL's partitioned cache across 3 rank processes, each cache 35% of the
// dataset: from the second epoch on storage is not read at all (independent
// caches: about 65%), and every sample arrives byte for byte.
TEST(RanksCommand, APartitionedCacheReadsStorageOnlyInTheFirstEpochAndDeliversEveryByte) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/fm", log = dir.path() + "/log";
  ASSERT_EQ(
      memtrain("data pack --from fashion-mnist --out " + data + " --resolution 32 --limit 600 --shard-size 64KiB", log),
      0)
      << text_of(log);
  const std::string bench = "data bench --data " + data + " --cache-size 35% --cache-policy minio --epochs 3 --warm";
  const std::string one = dir.path() + "/one.json", split = dir.path() + "/split.json",
                    partitioned = dir.path() + "/partitioned.json";
  ASSERT_EQ(memtrain(bench + " --json " + one, log), 0) << text_of(log);
  ASSERT_EQ(memtrain(bench + " --ranks 3 --json " + split, log), 0) << text_of(log);
  ASSERT_EQ(memtrain(bench + " --ranks 3 --partitioned-cache --json " + partitioned, log), 0) << text_of(log);
  const json o = json_of(one), s = json_of(split), p = json_of(partitioned);
  ASSERT_EQ(p.at("ranks"), 3);
  EXPECT_TRUE(p.at("partitioned_cache").get<bool>());
  for (int e = 0; e < 3; ++e) {
    const json& pe = p.at("epochs").at(e);
    // Every rank's samples together are one process's epoch, byte for byte.
    EXPECT_EQ(pe.at("digest"), o.at("epochs").at(e).at("digest")) << "epoch " << e;
    EXPECT_EQ(s.at("epochs").at(e).at("digest"), o.at("epochs").at(e).at("digest")) << "epoch " << e;
    EXPECT_EQ(pe.at("samples"), 600);
    ASSERT_EQ(pe.at("ranks").size(), 3u);
    EXPECT_GT(pe.at("peer_bytes_read").get<double>(), 0.5 * p.at("dataset_bytes").get<double>()) << "epoch " << e;
    if (e == 0) {
      EXPECT_EQ(pe.at("storage_bytes_read"), p.at("dataset_bytes"));
      continue;
    }
    EXPECT_LE(pe.at("storage_fraction").get<double>(), 0.05) << "epoch " << e;
    EXPECT_GE(s.at("epochs").at(e).at("storage_fraction").get<double>(), 0.5) << "epoch " << e;
  }
}

// Ranks training from packed shards: every rank's report carries its own
// input pipeline's counters, not only rank 0's.
TEST(RanksCommand, EveryRankReportsItsInputPipeline) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/fm", log = dir.path() + "/log", report = dir.path() + "/train.json";
  ASSERT_EQ(memtrain("data pack --from fashion-mnist --out " + data + " --resolution 32 --limit 64", log), 0)
      << text_of(log);
  ASSERT_EQ(memtrain("train --model resnet --width 4 --data " + data +
                         " --batch 4 --min-scale 16 --max-scale 24 --steps 2 --budget 90% --prep-threads 1 "
                         "--threads 1 --quiet --ranks 2 --json " +
                         report,
                     log),
            0)
      << text_of(log);
  for (const std::string& path : {report, report + ".rank1"}) {
    const json j = json_of(path);
    ASSERT_TRUE(j.at("input_pipeline").is_object()) << path;
    EXPECT_GT(j.at("input_pipeline").at("samples_delivered").get<int>(), 0) << path;
  }
}

// Training from packed shards, each rank reads only its rows of each global
// batch; with --partitioned-cache it caches its own part of the dataset and
// fetches the rest from its owner. Either way the ranks train exactly the
// same rows: the same losses and weights.
TEST(RanksCommand, RanksTrainingFromAPartitionedCacheReadEachSampleOnceAndTrainTheSame) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/fm", log = dir.path() + "/log";
  ASSERT_EQ(
      memtrain("data pack --from fashion-mnist --out " + data + " --resolution 32 --limit 240 --shard-size 64KiB", log),
      0)
      << text_of(log);
  const std::string run = "train --model resnet --width 4 --data " + data +
                          " --batch 8 --min-scale 16 --max-scale 24 --epochs 3 --budget 90% --prep-threads 1 "
                          "--threads 1 --quiet --ranks 2 --deterministic-reduce --cache-policy minio --cache-size 60%";
  const std::string apart = dir.path() + "/apart.json", shared = dir.path() + "/shared.json";
  ASSERT_EQ(memtrain(run + " --json " + apart, log), 0) << text_of(log);
  ASSERT_EQ(memtrain(run + " --partitioned-cache --json " + shared, log), 0) << text_of(log);
  const json a = json_of(apart), p = json_of(shared);
  EXPECT_EQ(losses(a), losses(p));
  EXPECT_EQ(a.at("parameter_digest"), p.at("parameter_digest"));
  double storage = 0, served = 0, from_peers = 0;
  for (const std::string& path : {shared, shared + ".rank1"}) {
    const json report = json_of(path);
    const json& pipeline = report.at("input_pipeline");
    // Each rank prepares its half of every batch, 3 epochs of 240 samples.
    EXPECT_EQ(pipeline.at("samples_delivered").get<int>(), 360) << path;
    EXPECT_TRUE(pipeline.at("partitioned_cache").get<bool>()) << path;
    storage += pipeline.at("storage_bytes_read").get<double>();
    served += pipeline.at("bytes_served").get<double>();
    from_peers += pipeline.at("peer_bytes_read").get<double>();
  }
  // Each rank's 60% holds its half: every sample came from storage once,
  // however many epochs and whoever needed it.
  double shard_bytes = 0;
  for (const auto& f : std::filesystem::directory_iterator(data)) shard_bytes += static_cast<double>(f.file_size());
  EXPECT_GT(storage, 0);
  EXPECT_LE(storage, shard_bytes);
  // (The prep threads may still be prefetching beyond the last step when a
  // rank reports, so what was served and received need not be equal there.)
  EXPECT_GT(from_peers, storage) << "3 epochs of the other half came from the peer";
  EXPECT_GT(served, storage);
  // The independent caches' rank read its half of every batch itself.
  EXPECT_EQ(json_of(apart).at("input_pipeline").at("samples_delivered").get<int>(), 360);
}

TEST(RanksCommand, APartitionedCacheWithoutRanksOrWithEvictionIsRefused) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log";
  const std::string bench = "data bench --data " + dir.path() + " --cache-size 35% --epochs 1";
  EXPECT_EQ(memtrain(bench + " --cache-policy minio --partitioned-cache", log), 2);
  EXPECT_NE(text_of(log).find("--partitioned-cache divides the dataset between ranks; give --ranks N"),
            std::string::npos)
      << text_of(log);
  EXPECT_EQ(memtrain(bench + " --cache-policy lru --ranks 2 --partitioned-cache", log), 2);
  EXPECT_NE(text_of(log).find("give --cache-policy minio, not lru"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain(bench + " --cache-policy minio --timeout 5", log), 2);
  EXPECT_NE(text_of(log).find("--timeout is for ranks"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain("train --model resnet --partitioned-cache --data " + dir.path() + " --cache-size 35%", log), 2);
  EXPECT_NE(text_of(log).find("are for ranks"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain("train --model resnet --ranks 2 --partitioned-cache --data " + dir.path() +
                         " --cache-size 35% --cache-policy lru",
                     log),
            2);
  EXPECT_NE(text_of(log).find("--partitioned-cache keeps each rank's part of packed shards and never evicts"),
            std::string::npos)
      << text_of(log);
  EXPECT_EQ(memtrain("train --ranks 2 --partitioned-cache", log), 2);
  EXPECT_NE(text_of(log).find("give --data DIR, --cache-size S and --cache-policy minio"), std::string::npos)
      << text_of(log);
}

TEST(RanksCommand, CommBenchMeasuresAllReducesAndFitsThem) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", report = dir.path() + "/comm.json";
  ASSERT_EQ(memtrain("comm bench --ranks 2 --threads 1 --sizes 64KiB,1MiB --tensors 1,16 --repeats 3 "
                     "--compute-seconds 0.05 --json " +
                         report,
                     log),
            0)
      << text_of(log);
  const json j = json_of(report);
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["threads"], 1);
  ASSERT_EQ(j["all_reduce"].size(), 4u);
  for (const json& p : j["all_reduce"]) {
    EXPECT_GT(p["seconds"].get<double>(), 0) << p;
    EXPECT_EQ(p["repeats"].size(), 3u) << p;
  }
  EXPECT_EQ(j["all_reduce"][3]["bytes"], 1 << 20);
  EXPECT_EQ(j["all_reduce"][3]["tensors"], 16);
  EXPECT_GT(j["compute"]["slowdown"].get<double>(), 0);
  EXPECT_GT(j["small_gather_seconds"].get<double>(), 0);
  const json& fit = j["fit"];
  for (const char* k : {"latency", "per_tensor", "seconds_per_byte"}) EXPECT_GE(fit[k].get<double>(), 0) << k;
  EXPECT_GT(fit["latency"].get<double>() + fit["per_tensor"].get<double>() + fit["seconds_per_byte"].get<double>(), 0);
}

// The small tagger, one thread per process.
const std::string kSmallTagger =
    " --layers 1 --width 32 --heads 2 --vocab 2000 --max-length 24 --threads 1 --warmup 1 --timed-steps 3";

TEST(RanksCommand, ProfileOverRanksTimesTheDataParallelStep) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", csv = dir.path() + "/p.csv", report = dir.path() + "/p.json";
  ASSERT_EQ(memtrain("profile --ranks 2 --method none,checkpoint --batches 2,4 --csv " + csv + " --json " + report +
                         kSmallTagger,
                     log),
            0)
      << text_of(log);
  const json j = json_of(report);
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["threads"], 1);
  ASSERT_EQ(j["measurements"].size(), 4u);
  for (const json& m : j["measurements"]) {
    EXPECT_GT(m["step_seconds"].get<double>(), 0) << m;
    EXPECT_EQ(m["timed_step_seconds"].size(), 3u) << m;
  }
  EXPECT_NE(text_of(csv).find("checkpoint,4,"), std::string::npos) << text_of(csv);
}

TEST(RanksCommand, AdviseAcrossRanksPredictsAndMeasuresEachRankCount) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", report = dir.path() + "/a.json";
  ASSERT_EQ(memtrain("advise --ranks 2 --validate --method none --batches 2,4,6,8 --batch-limit 8 --device-memory 1GiB "
                     "--plot " +
                         dir.path() + "/a.svg --json " + report + kSmallTagger,
                     log),
            0)
      << text_of(log);
  const json j = json_of(report);
  ASSERT_EQ(j["ranks"].size(), 1u);
  const json& r = j["ranks"][0];
  EXPECT_EQ(r["ranks"], 2);
  EXPECT_GT(r["gradient_bytes"].get<double>(), 0);
  EXPECT_GT(r["gradient_tensors"].get<int>(), 1);
  ASSERT_EQ(r["methods"].size(), 1u);
  const json& m = r["methods"][0];
  EXPECT_EQ(m["method"], "none");
  const int batch = m["batch"].get<int>();
  EXPECT_GE(batch, 1);
  EXPECT_LE(batch, 8);
  const double step = m["predicted_step_seconds"].get<double>();
  EXPECT_NEAR(step, m["predicted_compute_seconds"].get<double>() + m["predicted_communication_seconds"].get<double>(),
              1e-9);
  EXPECT_GT(m["predicted_communication_seconds"].get<double>(), 0);
  EXPECT_NEAR(m["predicted_throughput"].get<double>(), 2 * batch / step, 1e-6);
  EXPECT_GT(m["measured_step_seconds"].get<double>(), 0);
  EXPECT_EQ(r["recommended"], "none");
}

TEST(RanksCommand, CommBenchAdviseAndProfileRefuseRankFlagsThatDoNotFit) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log";
  EXPECT_EQ(memtrain("comm bench --sizes 1MiB", log), 2);
  EXPECT_NE(text_of(log).find("comm bench measures ranks; give --ranks N"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain("comm bench --ranks 2 --sizes 1MiB,2", log), 2);
  EXPECT_NE(text_of(log).find("'2' is below 4 bytes"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain("comm bench --ranks 2 --tensors 0", log), 2);
  EXPECT_NE(text_of(log).find("'0' is not a count"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain("advise --device-memory 1GiB --ranks 1", log), 2);
  EXPECT_NE(text_of(log).find("'1' is not a rank count; expected whole numbers 2..256"), std::string::npos)
      << text_of(log);
  EXPECT_EQ(memtrain("advise --device-memory 1GiB --ranks 2 --from-csv " + dir.path() + "/none.csv", log), 2);
  EXPECT_NE(text_of(log).find("--ranks measures the ranks' communication and the methods here"), std::string::npos)
      << text_of(log);
  EXPECT_EQ(memtrain("advise --device-memory 1GiB --timeout 5", log), 2);
  EXPECT_NE(text_of(log).find("advise: --timeout is for ranks"), std::string::npos) << text_of(log);
  EXPECT_EQ(memtrain("profile --timeout 5", log), 2);
  EXPECT_NE(text_of(log).find("profile: --timeout is for ranks"), std::string::npos) << text_of(log);
}

}  // namespace
}  // namespace memtrain
