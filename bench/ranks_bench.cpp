// Data-parallel ranks: `memtrain train --ranks N` on loopback against one
// process on the same global batches, for the tagger and the GPT at
// N = 2, 3, 4, every process with one compute thread:
//  - exactness: `--deterministic-reduce` against one process with
//    `--micro-batches N` (bit for bit: losses and parameter digest), and the
//    ring sum without dropout against one process on the concatenated batch
//    (largest relative loss difference);
//  - `--shard-optimizer`: the optimizer state and unconstrained peak per rank
//    against unsharded, and the digest against unsharded;
//  - time: step, schedule, gradient sum and weight sharing per step;
//  - faults: rank 1 of 2 killed (SIGKILL) after a checkpoint: how long rank 0
//    takes to exit and whether it names rank 1; the job resumed from the
//    checkpoint against the uninterrupted run;
// and CoorDL's partitioned cache (section ranks_bench_cache): `memtrain data
// bench` on packed Fashion-MNIST, one process against 3 ranks with
// independent caches and with a partitioned one, each cache 35% of the
// dataset: storage bytes per epoch and every sample's bytes (digests);
// and PAPAYA's model across ranks (section ranks_bench_advise): `memtrain
// advise --ranks 2,4 --validate` for the tagger and the GPT, predicted
// against measured step time per rank count and method;
// and the gradient sums beside the backward (section ranks_bench_overlap):
// 2 ranks of the tagger and the GPT at their default batch with `optimal`,
// `--sum-gradients during` against `after`, ring and ordered: how much of the
// sums the backward hides, against the Simulator's prediction, and the steps.
// --part training|cache|advise|overlap runs one of the four.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/lockstep.h"
#include "bench/memtrain_processes.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/units.h"
#include "runtime/comm/rank_group.h"

namespace memtrain::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A run's report and, with ranks, every other rank's.
struct Outcome {
  json report;
  std::vector<json> others;  // ranks 1..N-1
};

// Runs `memtrain ARGS --json FILE` (logged, its output to FILE's .log) and
// returns FILE's path.
std::string run_with_json(std::vector<std::string> args, const std::string& tag) {
  args.insert(args.end(), {"--json", tag + ".json"});
  std::string line;
  for (const std::string& a : args) line += " " + a;
  std::fprintf(stderr, "ranks_bench: memtrain%s\n", line.c_str());
  run_memtrain(args, tag + ".log");
  return tag + ".json";
}

Outcome train(std::vector<std::string> args, int ranks, const std::string& dir, int& index) {
  args.insert(args.begin(), "train");
  args.push_back("--quiet");
  const std::string report = run_with_json(args, dir + "/run" + std::to_string(index++));
  Outcome o{read_json_file(report), {}};
  for (int r = 1; r < ranks; ++r) o.others.push_back(read_json_file(report + ".rank" + std::to_string(r)));
  return o;
}

std::vector<double> losses(const json& report) {
  std::vector<double> out;
  for (const json& s : report["steps"]) out.push_back(s["loss"].get<double>());
  return out;
}

// Mean of a per-step field over the steps after the first `skip`.
double mean_step(const json& report, const char* field, std::size_t skip) {
  double total = 0;
  std::size_t n = 0;
  for (std::size_t i = skip; i < report["steps"].size(); ++i, ++n) total += report["steps"][i][field].get<double>();
  return n ? total / static_cast<double>(n) : 0;
}

double state_bytes(const json& report) { return report["summary"]["optimizer_state_bytes"].get<double>(); }

std::string mib(double bytes) { return fixed(bytes / (1 << 20), 1); }

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct ModelRun {
  std::string name;
  std::vector<std::string> flags;       // the model's, with the budget the exactness runs use
  std::vector<std::string> ring_flags;  // without dropout, at a budget the larger batch fits
};

struct Row {
  int n = 0;
  bool deterministic_equal = false;
  double ring_difference = 0;  // largest relative loss difference
  bool sharded_equal = false;
  double state_ratio = 0;   // largest rank's sharded optimizer state over unsharded
  double peak_saving = 0;   // unsharded minus sharded unconstrained peak, largest rank's
  double state_saving = 0;  // unsharded minus sharded optimizer state, largest rank's
  double ranks_step = 0, micro_step = 0, schedule = 0, reduce = 0, share = 0;
};

json data_bench(const std::vector<std::string>& args, const std::string& dir, int& index) {
  std::vector<std::string> all = {"data", "bench"};
  all.insert(all.end(), args.begin(), args.end());
  return read_json_file(run_with_json(all, dir + "/data" + std::to_string(index++)));
}

void publish_partitioned_cache(const std::string& out_path, std::int64_t images, int ranks, int epochs) {
  char pattern[] = "/tmp/memtrain-ranks-cache-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  int index = 0;
  const std::string shards = dir + "/fm";
  run_memtrain({"data", "pack", "--from", "fashion-mnist", "--out", shards, "--limit", std::to_string(images),
                "--shard-size", "32MiB"},
               dir + "/pack.log");
  const std::vector<std::string> common = {"--data",         shards,  "--cache-size", "35%",
                                           "--cache-policy", "minio", "--epochs",     std::to_string(epochs)};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  const std::vector<std::pair<std::string, json>> runs = {
      {"one process", data_bench(common, dir, index)},
      {std::to_string(ranks) + " ranks, independent caches",
       data_bench(with({"--ranks", std::to_string(ranks)}), dir, index)},
      {std::to_string(ranks) + " ranks, partitioned",
       data_bench(with({"--ranks", std::to_string(ranks), "--partitioned-cache"}), dir, index)}};
  const json& one = runs[0].second;
  const double dataset = one["dataset_bytes"].get<double>();
  std::ostringstream md;
  md << "## Partitioned cache across ranks (CPU)\n\n"
     << "Command: `build/bench/ranks_bench --part cache` (or `scripts/bench.sh ranks --part cache`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Data: " << images << " Fashion-MNIST images packed as 224 px JPEGs (" << mib(dataset)
     << " MiB); `memtrain data bench --cache-size 35% --cache-policy minio --epochs " << epochs
     << "` with cold reads (O_DIRECT) and every JPEG decoded, as one process, as `--ranks " << ranks
     << "` (each rank one sample in " << ranks
     << " of each epoch's order, and its own cache of 35% of the dataset) and "
     << "as `--ranks " << ranks
     << " --partitioned-cache` (each rank caches its own seeded third and fetches the rest from its "
        "owner over loopback TCP). Storage and peer bytes are the ranks' totals; \"digest\" compares the sum of "
        "a hash of every sample delivered with one process's.\n\n"
     << "| run | epoch | read from storage | of the dataset | from peers | hit rate | seconds | digest |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  bool exact = true;
  double independent_later = 0, partitioned_later = 0;
  for (const auto& [name, report] : runs) {
    for (std::size_t e = 0; e < report["epochs"].size(); ++e) {
      const json& ep = report["epochs"][e];
      const bool same = ep["digest"] == one["epochs"][e]["digest"];
      exact = exact && same;
      const double fraction = ep["storage_bytes_read"].get<double>() / dataset;
      if (e > 0 && &report == &runs[1].second) independent_later = std::max(independent_later, fraction);
      if (e > 0 && &report == &runs[2].second) partitioned_later = std::max(partitioned_later, fraction);
      md << "| " << name << " | " << e << " | " << mib(ep["storage_bytes_read"].get<double>()) << " MiB | "
         << fixed(100 * fraction, 1) << "% | " << mib(ep["peer_bytes_read"].get<double>()) << " MiB | "
         << fixed(100 * ep["hit_rate"].get<double>(), 1) << "% | " << fixed(ep["seconds"].get<double>(), 2) << " | "
         << (same ? "equal" : "**differs**") << " |\n";
    }
  }
  md << "\n";
  target_line(md, partitioned_later <= 0.05,
              std::to_string(ranks) + " ranks, each cache 35% of the dataset: storage reads from the second epoch on " +
                  fixed(100 * partitioned_later, 1) +
                  "% of the dataset with the partitioned cache (target at most 5%; " +
                  "independent caches: " + fixed(100 * independent_later, 1) + "%)");
  target_line(md, exact, "every sample arrives byte-exact: each epoch's digest over the ranks equals one process's");
  std::system(("rm -rf '" + dir + "'").c_str());
  publish("ranks_bench_cache", md.str(), out_path);
}

// `advise --ranks 2,4 --validate` for one model: its report.
json rank_advice(const std::vector<std::string>& model_flags, const std::string& batches, const std::string& dir,
                 int& index) {
  std::vector<std::string> args = {"advise",
                                   "--device-memory",
                                   "4GiB",
                                   "--method",
                                   "none,checkpoint:optimal",
                                   "--batches",
                                   batches,
                                   "--ranks",
                                   "2,4",
                                   "--validate",
                                   "--threads",
                                   "1",
                                   "--plot",
                                   dir + "/advise" + std::to_string(index) + ".svg"};
  args.insert(args.end(), model_flags.begin(), model_flags.end());
  return read_json_file(run_with_json(args, dir + "/advise" + std::to_string(index++)));
}

void publish_rank_advice(const std::string& out_path) {
  char pattern[] = "/tmp/memtrain-ranks-advise-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  int index = 0;
  const std::vector<std::pair<std::string, json>> runs = {
      {"tagger", rank_advice({"--batch-limit", "16"}, "1,2,3,4,6,8,12,16", dir, index)},
      {"gpt", rank_advice({"--model", "gpt", "--batch-limit", "8"}, "1,2,3,4,6,8", dir, index)}};
  std::ostringstream md;
  md << "## PAPAYA's model across ranks (CPU)\n\n"
     << "Command: `build/bench/ranks_bench --part advise` (or `scripts/bench.sh ranks --part advise`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Runs: `memtrain advise --device-memory 4GiB --method none,checkpoint:optimal --threads 1 --ranks 2,4 "
        "--validate`, the tagger at batches 1,2,3,4,6,8,12,16 (largest batch considered 16) and the GPT (`--model "
        "gpt`) at 1,2,3,4,6,8 (largest 8). Each rank count's communication is measured by `comm bench` at the model's "
        "gradient "
        "size; the predicted step is the one-process fit's time at that batch times the measured compute slowdown of "
        "the ranks at once, plus the fitted all-reduce and the step's two small gathers; measured is `profile "
        "--ranks N` at that batch (median of 3 timed steps, the slowest rank's). Every process computes with one "
        "thread; on 2 cores, 4 ranks share them.\n\n"
     << "| model | ranks | gradients | slowdown | method | batch per rank | compute s | all-reduce s | predicted "
        "step s | measured step s | error | samples/s (predicted) |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  double worst = 0;
  for (const auto& [name, report] : runs) {
    for (const json& r : report["ranks"]) {
      for (const json& m : r["methods"]) {
        const double predicted = m["predicted_step_seconds"].get<double>();
        const double measured = m["measured_step_seconds"].get<double>();
        const double error = predicted / measured - 1;
        worst = std::max(worst, std::fabs(error));
        md << "| " << name << " | " << r["ranks"].get<int>() << " | " << mib(r["gradient_bytes"].get<double>())
           << " MiB in " << r["gradient_tensors"].get<int>() << " | " << fixed(r["compute_slowdown"].get<double>(), 2)
           << "x | " << m["method"].get<std::string>() << " | " << m["batch"].get<int>() << " | "
           << fixed(m["predicted_compute_seconds"].get<double>(), 3) << " | "
           << fixed(m["predicted_communication_seconds"].get<double>(), 4) << " | " << fixed(predicted, 3) << " | "
           << fixed(measured, 3) << " | " << (error >= 0 ? "+" : "") << fixed(100 * error, 1) << "% | "
           << fixed(m["predicted_throughput"].get<double>(), 1) << " |\n";
      }
    }
  }
  md << "\n";
  target_line(md, worst <= 0.15,
              "`advise --ranks N`: predicted step time within " + fixed(100 * worst, 1) +
                  "% of measured for N = 2 and 4, every model and method (target within 15%)");
  std::system(("rm -rf '" + dir + "'").c_str());
  publish("ranks_bench_advise", md.str(), out_path);
}

struct OverlapRun {
  std::string model, sum, when;
  json report;
};

// Each model summed by the ring and in rank order, during and after the backward.
std::vector<OverlapRun> overlap_runs(const std::string& dir, std::int64_t steps) {
  int index = 0;
  const std::vector<std::pair<std::string, std::vector<std::string>>> models = {
      {"tagger", {"--budget", "50%"}}, {"gpt", {"--model", "gpt", "--budget", "80%"}}};
  std::vector<OverlapRun> runs;
  for (const auto& [model, flags] : models) {
    for (const std::string sum : {"ring", "ordered"}) {
      for (const std::string when : {"during", "after"}) {
        std::vector<std::string> args = {"--ranks", "2",         "--steps", std::to_string(steps), "--threads",
                                         "1",       "--planner", "optimal", "--sum-gradients",     when};
        args.insert(args.end(), flags.begin(), flags.end());
        if (sum == "ordered") args.push_back("--deterministic-reduce");
        runs.push_back({model, sum, when, train(args, 2, dir, index).report});
      }
    }
  }
  return runs;
}

void publish_overlap(const std::string& out_path, std::int64_t steps) {
  char pattern[] = "/tmp/memtrain-ranks-overlap-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::size_t skip = 4;  // collection steps
  const std::vector<OverlapRun> runs = overlap_runs(dir, steps);
  std::ostringstream md;
  md << "## Gradient sums beside the backward (CPU)\n\n"
     << "Command: `build/bench/ranks_bench --part overlap` (or `scripts/bench.sh ranks --part overlap`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Each run is `memtrain train --ranks 2 --steps " << steps
     << " --threads 1 --planner optimal` at the model's default batch per rank, the tagger at 50% of its peak and the "
        "GPT at 80%, with `--sum-gradients during` (each bucket summed as soon as the backward has made it final) or "
        "`after` (once the backward has run), by Gloo's ring or in rank order (`--deterministic-reduce`). Figures "
        "are rank 0's means per step after the 4 collection steps: the step, the schedule (the sums included), the "
        "sums' own time on the network, how long compute waited for them, the share hidden (1 - waited / sums) and "
        "the Simulator's predicted wait. \"same\": the ordered run's parameter digest and losses against the other "
        "timing's. Two ranks on this machine's 2 cores also share the cores with the sums.\n\n"
     << "| model | sum | sums | step s | schedule s | sums s | waited s | hidden | predicted wait s | same |\n"
     << "|---|---|---|---|---|---|---|---|---|---|\n";
  bool hidden_met = true, exact = true;
  std::string hidden_text;
  std::map<std::string, double> step_of;
  for (const OverlapRun& r : runs) {
    const json& report = r.report;
    double predicted = 0;
    std::size_t n = 0;
    for (std::size_t i = skip; i < report["steps"].size(); ++i, ++n)
      predicted += report["steps"][i]["predicted_reduce_stall_seconds"].get<double>();
    predicted = n ? predicted / static_cast<double>(n) : 0;
    const double hidden = report["summary"]["reduce_hidden_fraction"].get<double>();
    std::string same = "";
    if (r.sum == "ordered") {
      for (const OverlapRun& o : runs) {
        if (o.model == r.model && o.sum == r.sum && o.when != r.when) {
          const bool equal =
              o.report["parameter_digest"] == report["parameter_digest"] && losses(o.report) == losses(report);
          exact = exact && equal;
          same = equal ? "bit-equal" : "**differs**";
        }
      }
    }
    step_of[r.model + r.sum + r.when] = mean_step(report, "seconds", skip);
    md << "| " << r.model << " | " << r.sum << " | " << r.when << " | " << fixed(mean_step(report, "seconds", skip), 3)
       << " | " << fixed(mean_step(report, "schedule_seconds", skip), 3) << " | "
       << fixed(mean_step(report, "reduce_seconds", skip), 4) << " | "
       << fixed(mean_step(report, "reduce_stall_seconds", skip), 4) << " | " << fixed(100 * hidden, 1) << "% | "
       << fixed(predicted, 4) << " | " << same << " |\n";
    if (r.model == "tagger" && r.when == "during") {
      hidden_met = hidden_met && hidden >= 0.5;
      hidden_text += (hidden_text.empty() ? "" : ", ") + r.sum + " " + fixed(100 * hidden, 1) + "%";
    }
  }
  md << "\n";
  target_line(md, hidden_met,
              "gradient sums hidden under the backward, tagger, N = 2, optimal at 50%: " + hidden_text +
                  " (target at least 50%)");
  target_line(md, exact, "summing during or after the backward gives bit-equal ordered runs");
  for (const std::string model : {"tagger", "gpt"}) {
    const auto ratio = [&](const std::string& sum) {
      return fixed(step_of[model + sum + "during"] / step_of[model + sum + "after"], 3);
    };
    md << "- " << model << ": step time during / after: ring " << ratio("ring") << ", ordered " << ratio("ordered")
       << "\n";
  }
  std::system(("rm -rf '" + dir + "'").c_str());
  publish("ranks_bench_overlap", md.str(), out_path);
}

// The ranks' runs of one bench: where they write, how they are numbered,
// the flags every run shares.
struct RankRuns {
  std::string dir;
  int index = 0;
  std::int64_t steps = 0, batch = 0;
  std::vector<std::string> common;

  std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) const {
    a.insert(a.begin(), common.begin(), common.end());
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  Outcome run(const std::vector<std::string>& args, int ranks) { return train(args, ranks, dir, index); }
};

std::string n_text(std::int64_t v) { return std::to_string(v); }

// Sharded against unsharded, rank by rank: equal parameters, the state and peak saved.
void compare_shards(const Outcome& sharded, const Outcome& det, int n, Row& row) {
  row.sharded_equal = sharded.report["parameter_digest"] == det.report["parameter_digest"] &&
                      losses(sharded.report) == losses(det.report);
  std::vector<const json*> sharded_ranks = {&sharded.report}, det_ranks = {&det.report};
  for (const json& o : sharded.others) sharded_ranks.push_back(&o);
  for (const json& o : det.others) det_ranks.push_back(&o);
  row.peak_saving = 1e300;
  for (int r = 0; r < n; ++r) {
    const json& s = *sharded_ranks[r];
    const json& u = *det_ranks[r];
    row.sharded_equal = row.sharded_equal && s["parameter_digest"] == det.report["parameter_digest"];
    if (state_bytes(s) / state_bytes(u) >= row.state_ratio) {
      row.state_ratio = state_bytes(s) / state_bytes(u);
      row.state_saving = state_bytes(u) - state_bytes(s);
    }
    row.peak_saving =
        std::min(row.peak_saving, u["reference_peak_bytes"].get<double>() - s["reference_peak_bytes"].get<double>());
  }
}

// Model `m` on `n` ranks: deterministic against micro-batches, the ring
// against one process, sharded against unsharded. `det_report`: the
// deterministic run's report.
Row measure_ranks(RankRuns& runs, const ModelRun& m, int n, json& det_report) {
  const std::size_t skip = 4;  // collection steps, left out of the times
  const std::int64_t batch = runs.batch;
  Row row;
  row.n = n;
  const std::vector<std::string> per_rank = {"--batch", n_text(batch), "--ranks", n_text(n)};
  const Outcome det =
      runs.run(runs.with(m.flags, {"--batch", n_text(batch), "--ranks", n_text(n), "--deterministic-reduce"}), n);
  const Outcome micro = runs.run(runs.with(m.flags, {"--batch", n_text(batch * n), "--micro-batches", n_text(n)}), 1);
  const Outcome sharded = runs.run(runs.with(m.flags, {"--batch", n_text(batch), "--ranks", n_text(n),
                                                       "--deterministic-reduce", "--shard-optimizer"}),
                                   n);
  const Outcome ring = runs.run(runs.with(m.ring_flags, per_rank), n);
  const Outcome single = runs.run(runs.with(m.ring_flags, {"--batch", n_text(batch * n)}), 1);
  det_report = det.report;

  row.deterministic_equal =
      losses(det.report) == losses(micro.report) && det.report["parameter_digest"] == micro.report["parameter_digest"];
  for (const json& other : det.others)
    row.deterministic_equal = row.deterministic_equal && other["parameter_digest"] == det.report["parameter_digest"];
  const std::vector<double> a = losses(ring.report), b = losses(single.report);
  if (a.size() != b.size()) throw Error("ranks_bench: the ring and single runs trained different step counts");
  for (std::size_t i = 0; i < a.size(); ++i)
    row.ring_difference = std::max(row.ring_difference, std::abs(a[i] - b[i]) / std::abs(b[i]));
  compare_shards(sharded, det, n, row);
  row.ranks_step = mean_step(det.report, "seconds", skip);
  row.micro_step = mean_step(micro.report, "seconds", skip);
  row.schedule = mean_step(det.report, "schedule_seconds", skip);
  row.reduce = mean_step(det.report, "reduce_seconds", skip);
  row.share = mean_step(sharded.report, "share_seconds", skip);
  return row;
}

// Rank 1 of 2 killed after a checkpoint, then the job resumed.
struct KilledRank {
  int status0 = 0;          // rank 0's exit status
  double exit_after = 0;    // seconds from the kill to rank 0's exit
  bool named = false;       // rank 0 failed naming rank 1
  std::string why;          // the line that named it
  std::size_t resumed = 0;  // steps the resumed job trained
  bool resumed_equal = false;
};

KilledRank kill_and_resume(RankRuns& runs, const ModelRun& m, double timeout, const json& uninterrupted) {
  KilledRank k;
  const std::string checkpoints = runs.dir + "/ckpt";
  const int port = runtime::free_loopback_port();
  std::vector<std::string> by_hand =
      runs.with(m.flags, {"--batch", n_text(runs.batch), "--world", "2", "--deterministic-reduce", "--timeout",
                          fixed(timeout, 0), "--master", "127.0.0.1:" + std::to_string(port), "--checkpoint-dir",
                          checkpoints, "--checkpoint-every", "5", "--quiet"});
  by_hand.insert(by_hand.begin(), "train");
  std::vector<std::string> rank0 = by_hand, rank1 = by_hand;
  rank0.insert(rank0.end(), {"--rank", "0"});
  rank1.insert(rank1.end(), {"--rank", "1"});
  const pid_t p0 = start_memtrain(rank0, runs.dir + "/rank0.log");
  const pid_t p1 = start_memtrain(rank1, runs.dir + "/rank1.log");
  const std::string first = checkpoints + "/memtrain-rank1.ckpt";
  while (::access(first.c_str(), F_OK) != 0) {
    if (::waitpid(p1, nullptr, WNOHANG) != 0) throw Error("ranks_bench: rank 1 ended before its first checkpoint");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(p1, SIGKILL);
  const Clock::time_point killed = Clock::now();
  ::waitpid(p0, &k.status0, 0);
  k.exit_after = std::chrono::duration<double>(Clock::now() - killed).count();
  ::waitpid(p1, nullptr, 0);
  const std::string log0 = text_of(runs.dir + "/rank0.log");
  k.named = WIFEXITED(k.status0) && WEXITSTATUS(k.status0) != 0 && log0.find("rank 1") != std::string::npos;
  for (std::istringstream lines(log0); std::getline(lines, k.why);) {
    if (k.why.find("rank 1") != std::string::npos) break;
  }
  const Outcome resumed =
      runs.run(runs.with(m.flags, {"--batch", n_text(runs.batch), "--ranks", "2", "--deterministic-reduce",
                                   "--checkpoint-dir", checkpoints, "--resume"}),
               2);
  const std::vector<double> whole = losses(uninterrupted), rest = losses(resumed.report);
  k.resumed = rest.size();
  k.resumed_equal = resumed.report["parameter_digest"] == uninterrupted["parameter_digest"] && !rest.empty() &&
                    rest.size() < whole.size() &&
                    std::equal(rest.begin(), rest.end(), whole.end() - static_cast<long>(rest.size()));
  return k;
}

void write_rows(std::ostringstream& md, const std::vector<ModelRun>& models,
                std::map<std::string, std::vector<Row>>& rows) {
  for (const ModelRun& m : models) {
    md << "### " << m.name << "\n\n"
       << "| N | ranks = micro | ring vs one | sharded = unsharded | optimizer state per rank | peak saved / state "
          "saved | step s (ranks / one) | schedule s | sum s | share s |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows[m.name]) {
      md << "| " << r.n << " | " << (r.deterministic_equal ? "bit-equal" : "**differs**") << " | "
         << fixed(r.ring_difference, 9) << " | " << (r.sharded_equal ? "bit-equal" : "**differs**") << " | "
         << fixed(100 * r.state_ratio, 2) << "% | " << mib(r.peak_saving) << " / " << mib(r.state_saving) << " MiB | "
         << fixed(r.ranks_step, 3) << " / " << fixed(r.micro_step, 3) << " | " << fixed(r.schedule, 3) << " | "
         << fixed(r.reduce, 3) << " | " << fixed(r.share, 3) << " |\n";
    }
    md << "\n";
  }
}

void write_targets(std::ostringstream& md, const std::map<std::string, std::vector<Row>>& rows, std::int64_t steps,
                   double timeout, const KilledRank& k) {
  bool exact = true, close = true, shard = true;
  for (const auto& [name, list] : rows) {
    for (const Row& r : list) {
      exact = exact && r.deterministic_equal;
      close = close && r.ring_difference <= 1e-6;
      shard = shard && r.sharded_equal && r.state_ratio <= 1.0 / r.n + 0.05 && r.peak_saving >= 0.95 * r.state_saving;
    }
  }
  target_line(md, exact,
              "N = 2, 3, 4, tagger and GPT, " + std::to_string(steps) +
                  " steps: `--deterministic-reduce` bit-equal to one process with `--micro-batches N`");
  target_line(md, close, "ring-summed losses within 1e-6 of one process on the concatenated batch");
  target_line(md, shard,
              "`--shard-optimizer`: bit-equal to unsharded, optimizer state per rank at most 1/N + 5% of unsharded, "
              "and the unconstrained peak lower by (at least 95% of) the state saved");
  target_line(md, k.named && k.exit_after <= 2 * timeout,
              "tagger, rank 1 of 2 killed (SIGKILL) after its first checkpoint, `--timeout " + fixed(timeout, 0) +
                  "`: rank 0 exited " +
                  (WIFEXITED(k.status0) ? "with status " + std::to_string(WEXITSTATUS(k.status0)) : "") + " after " +
                  fixed(k.exit_after, 2) + " s, " + (k.named ? "naming rank 1" : "**not naming rank 1**") +
                  (k.why.empty() ? "" : " (`" + k.why + "`)"));
  target_line(md, k.resumed_equal,
              "the job resumed from its last checkpoint (steps left: " + std::to_string(k.resumed) +
                  "): losses and parameter digest bit-equal to the uninterrupted run");
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "ranks_bench");
  const std::string out_path = flags.text("out", "docs/BENCHMARKS.md");
  const std::int64_t steps = flags.integer("steps", 50, 6, 10000);
  const std::int64_t batch = flags.integer("batch", 4, 1, 1024);
  const double timeout = flags.real("timeout", 10, 1, 600);
  const std::string part = flags.choice("part", "all", {"all", "training", "cache", "advise", "overlap"});
  const std::int64_t images = flags.integer("images", 20000, 30, 60000);
  flags.check_all_used();

  if (part == "all" || part == "cache") publish_partitioned_cache(out_path, images, 3, 3);
  if (part == "all" || part == "advise") publish_rank_advice(out_path);
  if (part == "all" || part == "overlap") publish_overlap(out_path, std::min<std::int64_t>(steps, 30));
  if (part == "cache" || part == "advise" || part == "overlap") return 0;

  char pattern[] = "/tmp/memtrain-ranks-bench-XXXXXX";
  RankRuns runs;
  runs.dir = ::mkdtemp(pattern);
  runs.steps = steps;
  runs.batch = batch;
  runs.common = {"--steps", std::to_string(steps), "--threads", "1", "--planner", "optimal"};
  // The tagger at 50% of its peak (stages recomputed); the GPT's least budget
  // for optimal at batch 4 is about 71% of its peak. Without dropout the
  // tagger's single process needs about 65%.
  const std::vector<ModelRun> models = {
      {"tagger", {"--budget", "50%"}, {"--budget", "70%", "--dropout", "0"}},
      {"gpt", {"--model", "gpt", "--budget", "80%"}, {"--model", "gpt", "--budget", "80%", "--dropout", "0"}}};
  std::map<std::string, std::vector<Row>> rows;
  json tagger_two;  // the tagger's deterministic 2-rank run: the fault run's reference
  for (const ModelRun& m : models) {
    for (int n : {2, 3, 4}) {
      json det;
      rows[m.name].push_back(measure_ranks(runs, m, n, det));
      if (m.name == "tagger" && n == 2) tagger_two = det;
    }
  }
  const KilledRank killed = kill_and_resume(runs, models[0], timeout, tagger_two);

  std::ostringstream md;
  md << "## Data-parallel ranks on loopback (CPU)\n\n"
     << "Command: `build/bench/ranks_bench` (or `scripts/bench.sh ranks`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Each run is `memtrain train --steps " << steps << " --threads 1 --planner optimal`, every rank and every "
     << "single process with one compute thread, " << batch
     << " rows per rank; the tagger at 50% of its peak, the GPT at 80% (its least budget is about 71%). "
        "\"ranks = micro\": `--ranks N --deterministic-reduce` against one process with `--batch "
     << batch << "N --micro-batches N`, losses and parameter digests of every rank. \"ring vs one\": `--ranks N` "
     << "(Gloo's ring sum) against one process on the concatenated batch, both `--dropout 0` (the tagger at 70%), "
        "largest relative loss difference. \"sharded\": `--shard-optimizer` added to the deterministic run. Times "
        "are means per step after the 4 collection steps: the ranks' step, the single process's step with N "
        "micro-batches (the same global batch on one thread), and the ranks' schedule, gradient sum and weight "
        "sharing. N ranks on this machine's 2 cores share them, so the ranks' step is not a speed-up figure.\n\n";
  write_rows(md, models, rows);
  write_targets(md, rows, steps, timeout, killed);
  md << "- The gradient sums run beside the backward here (\"sum s\" is their time on the network); how much of "
        "them it hides: [gradient sums beside the backward](#gradient-sums-beside-the-backward-cpu).\n"
        "- Not built, not measured: ZeRO-2, NCCL on a GPU.\n";
  std::system(("rm -rf '" + runs.dir + "'").c_str());
  publish("ranks_bench", md.str(), out_path);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) { return memtrain::bench::bench_main("ranks_bench", memtrain::bench::run, argc, argv); }
