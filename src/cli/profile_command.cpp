// `memtrain profile`: measure peak memory and step time of memory methods
// over batch sizes, for PAPAYA's model (`memtrain advise --from-csv`).
#include <cstdio>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/help_text.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "cli/profile_flags.h"
#include "cli/rank_flags.h"
#include "cli/rank_launcher.h"
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
    "  --json FILE                  also write them, with every timed step, as JSON\n"
    "\n"
    "Ranks: with --ranks N (or --rank R --world N --master HOST:PORT, one process per node) every\n"
    "rank runs the same input at the batch size (per rank) and the ranks sum their gradients as\n"
    "`train --ranks` does; a timed step counts as long as the slowest rank's. --threads defaults\n"
    "to the cores divided by the ranks on this machine. Rank 0 writes the files.\n"
    "  --ranks N                    start N ranks on this machine, meeting over loopback\n"
    "  --rank R --world N --master HOST:PORT\n"
    "                               be rank R of N; rank 0 serves the store at HOST:PORT\n"
    "  --timeout S                  a rank that does not answer within S seconds is named (default 60)\n";

}  // namespace

int run_profile(const std::vector<std::string>& args) {
  Flags flags(args, with_workload_switches({"help", "launched"}), "profile");
  if (flags.has("help")) {
    std::fputs(expand_help(kProfileCommandHelp).c_str(), stdout);
    return 0;
  }
  const WorkloadFlags workload_flags = read_workload_flags(flags);
  const RankFlags ranks = read_rank_flags(flags, "profile");
  if (!ranks.ranked() && flags.has("timeout"))
    throw UsageError("profile: --timeout is for ranks; give --ranks N or --rank/--world/--master");
  const bool threads_given = flags.has("threads");
  ProfileRequest request = read_profile_flags(flags);
  if (ranks.launch > 0 && !threads_given)
    request.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / ranks.launch));
  const std::string csv_path = flags.text("csv", "profile.csv");
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();
  if (ranks.launch > 0) {
    std::vector<std::string> rank_args = args_without_ranks(args);
    if (!threads_given) {
      rank_args.push_back("--threads");
      rank_args.push_back(std::to_string(request.threads));
    }
    return launch_ranks({"profile"}, rank_args, ranks.launch, ranks.address.timeout);
  }

  const Workload workload(workload_flags);
  std::unique_ptr<runtime::RankGroup> group;
  if (ranks.by_hand) {
    group = std::make_unique<runtime::RankGroup>(ranks.address);
    request.options.ranks = group.get();
  }
  std::vector<runtime::ProfilePoint> points;
  try {
    points = run_profile_sweep(workload, request, !group || group->rank() == 0);
  } catch (const runtime::RankFailure&) {
    throw;
  } catch (const std::exception& e) {
    if (!group) throw;
    const std::string why = "rank " + std::to_string(group->rank()) + ": " + e.what();
    group->fail(why);
    throw Error(why);
  }
  if (group && group->rank() > 0) return 0;
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
    j["ranks"] = group ? group->world() : 1;
    j["threads"] = request.threads;
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
