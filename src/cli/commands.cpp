#include "cli/commands.h"

#include <cstdio>

#include "core/error.h"

namespace memtrain::cli {

namespace {

const char* kUsage =
    "memtrain: train deep networks under a device-memory budget\n"
    "\n"
    "usage: memtrain <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train      train a model under a memory budget (default: Transformer tagger on Brown, mimose, 50%)\n"
    "  plan       plan a chain given as JSON and print the schedule, its simulated peak and time\n"
    "  simulate   price a planner's schedule with host offload: time, peak, bytes swapped, copy time hidden\n"
    "  calibrate  measure this machine's stage times and host-link bandwidths into a chain file\n"
    "  profile    measure peak memory and step time of memory methods over batch sizes (CSV)\n"
    "  advise     fit PAPAYA's model to such measurements and say which method and batch pay off\n"
    "  comm       `comm bench`: all-reduce time by size over ranks, compute slowdown of ranks sharing a machine\n"
    "  data       dataset tools: `data pack` writes Fashion-MNIST or Brown as tar shards, `data bench` caches\n"
    "  jobs       several training jobs, each its own process, sharing one device budget under a policy\n"
    "  stalls     where an epoch from packed shards waits: fetching, preprocessing; what-if cache and threads\n"
    "\n"
    "memtrain <command> --help describes each command's flags.\n";

}  // namespace

int run_memtrain(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (args[0] == "train") return run_train(rest);
    if (args[0] == "plan") return run_plan(rest);
    if (args[0] == "profile") return run_profile(rest);
    if (args[0] == "advise") return run_advise(rest);
    if (args[0] == "data") return run_data(rest);
    if (args[0] == "stalls") return run_stalls(rest);
    if (args[0] == "simulate") return run_simulate(rest);
    if (args[0] == "calibrate") return run_calibrate(rest);
    if (args[0] == "jobs") return run_jobs(rest);
    if (args[0] == "comm") return run_comm(rest);
    throw UsageError("unknown command '" + args[0] +
                     "'; known: advise, calibrate, comm, data, jobs, plan, profile, simulate, stalls, train");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "memtrain: %s\n", e.what());
    return 2;
  } catch (const InternalError& e) {
    std::fprintf(stderr, "memtrain: %s\nmemtrain: this is a bug in memtrain, not in your input; please report it\n",
                 e.what());
    return 70;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memtrain: %s\n", e.what());
    return 1;
  }
}

}  // namespace memtrain::cli
