#include "cli/profile_flags.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/compute_threads.h"
#include "cli/planner_flags.h"
#include "core/error.h"
#include "core/parse_number.h"

namespace memtrain::cli {

const char* const kProfileHelp =
    "  --method LIST                methods, comma-separated (default none,checkpoint):\n"
    "                               none: keep everything; checkpoint: recompute with --planner;\n"
    "                               checkpoint:P: recompute with planner P (PLANNERS);\n"
    "                               offload and compress are reported as not built yet\n"
    "  --batches LIST               batch sizes, comma-separated (default 4,8,16,32)\n"
    "  --planner P                  the planner of `checkpoint` (default all)\n"
    "  --budget B                   checkpointing's budget: bytes or N% of each batch's unconstrained\n"
    "                               peak (default: the planner's least, its most memory-saving setting)\n"
    "  --slots N | --slot-bytes N   optimal and joint: how finely memory is cut (default 500 slots)\n"
    "  --warmup N                   untimed steps per measurement (default 1)\n"
    "  --timed-steps N              timed steps per measurement; their median is the step time (default 3)\n"
    "  --seed N                     seed for weights and dropout (default 1)\n"
    "  --threads N                  CPU threads (default: all cores)\n"
    "  --device cpu|cuda[:N]        where to run (default cpu)\n";

std::vector<std::int64_t> parse_batch_list(const std::string& text, const std::string& what) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::int64_t v = parse_whole_integer(item).value_or(0);
    if (v < 1 || v > 1000000) {
      throw UsageError(what + " '" + text + "': '" + item +
                       "' is not a batch size; expected whole numbers 1..1000000, " +
                       "comma-separated (e.g. 4,8,16,32)");
    }
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) throw UsageError(what + " is empty; expected batch sizes, e.g. 4,8,16,32");
  std::sort(out.begin(), out.end());
  return out;
}

ProfileRequest read_profile_flags(Flags& flags) {
  ProfileRequest r;
  const std::string planner = flags.text("planner", kDefaultCheckpointPlanner);
  std::optional<BudgetSpec> budget;
  if (flags.has("budget")) budget = parse_budget(flags.text("budget", ""), "--budget");
  r.options.planner_options = parse_planner_options(flags);
  r.options.warmup_steps = static_cast<int>(flags.integer("warmup", 1, 0, 100));
  r.options.timed_steps = static_cast<int>(flags.integer("timed-steps", 3, 1, 1000));
  r.options.seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  r.options.device = flags.text("device", "cpu");
  r.threads = static_cast<int>(flags.integer("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  r.batches = parse_batch_list(flags.text("batches", "4,8,16,32"), "--batches");
  std::stringstream in(flags.text("method", "none,checkpoint"));
  std::string name;
  while (std::getline(in, name, ',')) {
    if (const auto why = runtime::unbuilt_method(name)) {
      std::fprintf(stderr, "memtrain: skipping method %s: %s\n", name.c_str(), why->c_str());
      continue;
    }
    runtime::ProfileMethod m = runtime::parse_profile_method(name, planner, budget);
    const bool seen = std::any_of(r.methods.begin(), r.methods.end(),
                                  [&](const runtime::ProfileMethod& o) { return o.name == m.name; });
    if (!seen) r.methods.push_back(std::move(m));
  }
  if (r.methods.empty())
    throw UsageError("--method: no method left to measure; expected none, checkpoint or checkpoint:PLANNER");
  return r;
}

std::vector<runtime::ProfilePoint> run_profile_sweep(const Workload& workload, const ProfileRequest& request,
                                                     bool report) {
  use_compute_threads(request.threads);
  std::vector<runtime::ProfilePoint> points;
  for (const runtime::ProfileMethod& m : request.methods) {
    for (std::int64_t b : request.batches) {
      runtime::ProfilePoint p = runtime::profile_batch(
          m, b, workload.model_factory(),
          [&](std::int64_t batch) { return workload.batches(batch, request.options.seed); }, request.options);
      if (report)
        std::fprintf(stderr, "memtrain: %-20s batch %5lld  input %-12s peak %12s  step %8.4f s  %8.1f samples/s\n",
                     m.name.c_str(), static_cast<long long>(b), p.signature.c_str(),
                     format_bytes(p.measurement.peak_bytes).c_str(), p.measurement.step_seconds,
                     static_cast<double>(b) / p.measurement.step_seconds);
      points.push_back(std::move(p));
    }
  }
  return points;
}

void write_measurements_file(const std::vector<predict::Measurement>& rows, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error("--csv: cannot write '" + path + "'");
  predict::write_measurements_csv(out, rows);
  if (!out.flush()) throw Error("--csv: writing '" + path + "' failed");
}

}  // namespace memtrain::cli
