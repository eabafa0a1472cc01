// `memtrain profile`: measure peak memory and step time of memory methods
// over batch sizes, for PAPAYA's model (`memtrain advise --from-csv`).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/help_text.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "cli/profile_flags.h"
#include "cli/workload_flags.h"
#include "core/error.h"

namespace memtrain::cli {

namespace {

const char* kProfileCommandHelp =
    "usage: memtrain profile [flags]\n"
    "\n"
    "Runs a few training steps of each method at each batch size on the dataset's largest\n"
    "input (the one that decides whether a batch fits) and records batch size, peak device\n"
    "memory (optimizer update included) and step time (median of the timed steps, after\n"
    "warm-up) as CSV (method,batch,peak_bytes,step_seconds) and optionally JSON.\n"
    "\n"
    "WORKLOAD"
    "PROFILE"
    "  --csv FILE                   where to write the measurements (default profile.csv)\n"
    "  --json FILE                  also write them, with every timed step, as JSON\n";

}  // namespace

int run_profile(const std::vector<std::string>& args) {
  Flags flags(args, with_workload_switches({"help"}), "profile");
  if (flags.has("help")) {
    std::fputs(expand_help(kProfileCommandHelp).c_str(), stdout);
    return 0;
  }
  const WorkloadFlags workload_flags = read_workload_flags(flags);
  const ProfileRequest request = read_profile_flags(flags);
  const std::string csv_path = flags.text("csv", "profile.csv");
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  const Workload workload(workload_flags);
  const std::vector<runtime::ProfilePoint> points = run_profile_sweep(workload, request);
  std::vector<predict::Measurement> rows;
  for (const runtime::ProfilePoint& p : points) rows.push_back(p.measurement);
  write_measurements_file(rows, csv_path);
  if (!json_path.empty()) {
    nlohmann::json j;
    j["model"] = workload_flags.model;
    j["data"] = workload_flags.data;
    j["device"] = request.options.device;
    j["warmup_steps"] = request.options.warmup_steps;
    j["timed_steps"] = request.options.timed_steps;
    j["measurements"] = nlohmann::json::array();
    for (const runtime::ProfilePoint& p : points) {
      j["measurements"].push_back({{"method", p.measurement.method},
                                   {"batch", p.measurement.batch},
                                   {"input", p.signature},
                                   {"peak_bytes", p.measurement.peak_bytes},
                                   {"step_seconds", p.measurement.step_seconds},
                                   {"timed_step_seconds", p.timed_seconds},
                                   {"budget_bytes", p.budget_bytes}});
    }
    write_json_file(j, json_path);
  }
  std::printf("wrote %zu measurements to %s%s\n", rows.size(), csv_path.c_str(),
              json_path.empty() ? "" : (" and " + json_path).c_str());
  return 0;
}

}  // namespace memtrain::cli
