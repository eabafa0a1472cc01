// What `profile` and `advise` measure: methods, batch sizes, steps, and the
// checkpoint planner and budget, from their shared flags; and the sweep that
// measures them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/workload_flags.h"
#include "runtime/training/profiler.h"

namespace memtrain::cli {

extern const char* const kProfileHelp;  // help lines for the flags below

struct ProfileRequest {
  std::vector<runtime::ProfileMethod> methods;  // runnable ones only
  std::vector<std::int64_t> batches;
  runtime::ProfileOptions options;
  int threads = 1;
};

// Reads --method, --batches, --planner, --budget, --warmup, --timed-steps,
// --seed, --device, --threads and the slot flags. Methods not built yet are
// reported on stderr and left out.
ProfileRequest read_profile_flags(Flags& flags);

// "4,8,16" -> {4, 8, 16}; UsageError naming `what` for anything else.
std::vector<std::int64_t> parse_batch_list(const std::string& text, const std::string& what);

// One measurement per method and batch, with a line on stderr for each
// when `report`.
std::vector<runtime::ProfilePoint> run_profile_sweep(const Workload& workload, const ProfileRequest& request,
                                                     bool report = true);

// The measurements as CSV (predict/measurement.h); Error naming the path.
void write_measurements_file(const std::vector<predict::Measurement>& rows, const std::string& path);

// The planner checkpointing uses when a method does not name one.
inline constexpr const char* kDefaultCheckpointPlanner = "all";

}  // namespace memtrain::cli
