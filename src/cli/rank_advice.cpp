#include "cli/rank_advice.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/rank_launcher.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "predict/all_reduce_model.h"
#include "predict/measurement.h"
#include "predict/rank_scaling.h"

namespace memtrain::cli {

namespace {

// A folder under /tmp for the files of the runs started, removed after.
class ScratchFolder {
 public:
  ScratchFolder() {
    char dir[] = "/tmp/memtrain-advise-XXXXXX";
    if (!::mkdtemp(dir)) throw Error("advise: cannot make a work folder under /tmp");
    path_ = dir;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

nlohmann::json read_json(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw Error("advise: " + what + " wrote no report (" + path + ")");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error("advise: " + what + "'s report " + path + " is not JSON: " + e.what());
  }
}

struct Gradients {
  Bytes bytes = 0;
  std::int64_t tensors = 0;
};

Gradients gradients_of(const Workload& workload) {
  Gradients g;
  for (const torch::Tensor& p : workload.model_factory()().parameters()) {
    g.bytes += static_cast<Bytes>(p.nbytes());
    ++g.tensors;
  }
  return g;
}

// `comm bench` over `ranks` ranks at sizes around the gradients'.
predict::RankMachine measure_machine(int ranks, const Gradients& g, int threads, Seconds timeout,
                                     const ScratchFolder& scratch) {
  const std::string json = scratch.file("comm-" + std::to_string(ranks) + ".json");
  std::string sizes;
  for (double f : {0.25, 0.5, 1.0, 2.0})
    sizes += (sizes.empty() ? "" : ",") + std::to_string(std::max<Bytes>(4, static_cast<Bytes>(f * g.bytes)));
  const std::vector<std::string> args{
      "--sizes",   sizes, "--tensors", "1," + std::to_string(g.tensors), "--threads", std::to_string(threads),
      "--repeats", "5",   "--timeout", format_number("%g", timeout),     "--json",    json};
  std::printf("\nmeasuring %d ranks' communication (comm bench)\n", ranks);
  std::fflush(stdout);
  const int status = launch_ranks({"comm", "bench"}, args, ranks, timeout);
  if (status != 0)
    throw Error("advise: comm bench over " + std::to_string(ranks) + " ranks failed (exit " + std::to_string(status) +
                ")");
  const nlohmann::json j = read_json(json, "comm bench");
  std::vector<predict::AllReducePoint> points;
  for (const nlohmann::json& p : j.at("all_reduce"))
    points.push_back({p.at("bytes").get<Bytes>(), p.at("tensors").get<std::int64_t>(), p.at("seconds").get<double>()});
  predict::RankMachine m;
  m.ranks = ranks;
  m.all_reduce = predict::fit_all_reduce_model(points, ranks);
  m.compute_slowdown = j.at("compute").at("slowdown").get<double>();
  // A step gathers twice: the count its loss averages over, then the losses.
  m.sync_seconds = 2 * j.at("small_gather_seconds").get<double>();
  return m;
}

// `profile --ranks` of one method at one batch: the measured step seconds.
Seconds measure_ranks(const std::string& method, std::int64_t batch, int ranks, int threads,
                      const RankAdviceRequest& request, const ScratchFolder& scratch) {
  const std::string csv = scratch.file("profile-" + std::to_string(ranks) + "-" + std::to_string(batch) + ".csv");
  std::vector<std::string> args = request.profile_args;
  for (const std::string& a : {std::string("--method"), method, std::string("--batches"), std::to_string(batch),
                               std::string("--threads"), std::to_string(threads), std::string("--timeout"),
                               format_number("%g", request.timeout), std::string("--csv"), csv})
    args.push_back(a);
  const int status = launch_ranks({"profile"}, args, ranks, request.timeout);
  if (status != 0) {
    throw Error("advise: profile of " + method + " at batch " + std::to_string(batch) + " over " +
                std::to_string(ranks) + " ranks failed (exit " + std::to_string(status) + ")");
  }
  const std::vector<predict::Measurement> rows = predict::read_measurements_csv_file(csv);
  if (rows.size() != 1)
    throw Error("advise: profile over ranks wrote " + std::to_string(rows.size()) + " rows to " + csv);
  return rows[0].step_seconds;
}

}  // namespace

std::vector<int> parse_rank_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::int64_t v = parse_whole_integer(item).value_or(0);
    if (v < 2 || v > 256)
      throw UsageError("--ranks '" + text + "': '" + item + "' is not a rank count; expected whole numbers 2..256, " +
                       "comma-separated (e.g. 2,4)");
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw UsageError("--ranks is empty; expected rank counts, e.g. 2,4");
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json advise_ranks(const predict::Advice& advice, const Workload& workload, const ProfileRequest& request,
                            const RankAdviceRequest& ranks) {
  const ScratchFolder scratch;
  const Gradients g = gradients_of(workload);
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::string> lines;
  for (int n : ranks.ranks) {
    const predict::RankMachine machine = measure_machine(n, g, request.threads, ranks.timeout, scratch);
    nlohmann::json methods = nlohmann::json::array();
    std::string best_method;
    double best_throughput = 0;
    std::vector<std::pair<const predict::MethodAdvice*, predict::RankStep>> steps;
    for (const predict::MethodAdvice& m : advice.methods) {
      if (m.max_batch == 0) continue;
      const predict::RankStep s = predict::best_rank_step(m.model, machine, g.bytes, g.tensors, m.max_batch);
      steps.emplace_back(&m, s);
      if (s.throughput > best_throughput) {
        best_throughput = s.throughput;
        best_method = m.method;
      }
    }
    std::printf(
        "\n%d ranks, %d threads each: compute %.2fx slower than one rank alone; all-reduce %.4f s + %.3g s "
        "per tensor + bytes / %.3f GB/s (R2 %.3f); gradients %s in %lld tensors: %.4f s per step\n",
        n, request.threads, machine.compute_slowdown, machine.all_reduce.latency, machine.all_reduce.per_tensor,
        machine.all_reduce.bandwidth() / 1e9, machine.all_reduce.r2, format_bytes(g.bytes).c_str(),
        static_cast<long long>(g.tensors),
        machine.all_reduce.seconds(static_cast<double>(g.bytes), static_cast<double>(g.tensors)) +
            machine.sync_seconds);
    std::printf("%-20s %9s %11s %11s %11s %12s %9s", "method", "batch", "compute s", "comm s", "step s", "samples/s",
                "vs 1 rank");
    if (ranks.validate) std::printf(" %11s %7s", "measured s", "error");
    std::printf("\n");
    for (const auto& [m, s] : steps) {
      const double speedup = m->predicted_throughput > 0 ? s.throughput / m->predicted_throughput : 0;
      nlohmann::json row = {{"method", m->method},
                            {"batch", s.batch},
                            {"predicted_compute_seconds", s.compute},
                            {"predicted_communication_seconds", s.communication},
                            {"predicted_step_seconds", s.step},
                            {"predicted_throughput", s.throughput},
                            {"speedup_over_one_rank", speedup}};
      std::printf("%-20s %9lld %11.4f %11.4f %11.4f %12.1f %8.2fx", m->method.c_str(), static_cast<long long>(s.batch),
                  s.compute, s.communication, s.step, s.throughput, speedup);
      if (ranks.validate) {
        const Seconds measured = measure_ranks(m->method, s.batch, n, request.threads, ranks, scratch);
        row["measured_step_seconds"] = measured;
        std::printf(" %11.4f %+6.1f%%", measured, 100 * (s.step / measured - 1));
      }
      std::printf("\n");
      methods.push_back(row);
    }
    if (!best_method.empty()) std::printf("recommended on %d ranks: %s\n", n, best_method.c_str());
    out.push_back({{"ranks", n},
                   {"threads", request.threads},
                   {"compute_slowdown", machine.compute_slowdown},
                   {"all_reduce",
                    {{"latency", machine.all_reduce.latency},
                     {"per_tensor", machine.all_reduce.per_tensor},
                     {"seconds_per_byte", machine.all_reduce.seconds_per_byte},
                     {"r2", machine.all_reduce.r2}}},
                   {"sync_seconds", machine.sync_seconds},
                   {"gradient_bytes", g.bytes},
                   {"gradient_tensors", g.tensors},
                   {"methods", methods},
                   {"recommended", best_method}});
  }
  return out;
}

}  // namespace memtrain::cli
