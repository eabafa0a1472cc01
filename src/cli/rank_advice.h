// `memtrain advise --ranks LIST`: PAPAYA's model across ranks. For each rank
// count it measures the ranks' communication on this machine (`comm bench`
// with the model's gradient size), fits the all-reduce, and predicts per
// method the batch per rank with the highest throughput, its step time and
// the job's samples/s (predict/rank_scaling.h); with validation it runs
// each there (`profile --ranks`) and prints predicted against measured.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/profile_flags.h"
#include "cli/workload_flags.h"
#include "core/units.h"
#include "predict/advisor.h"

namespace memtrain::cli {

struct RankAdviceRequest {
  std::vector<int> ranks;  // rank counts, each >= 2
  Seconds timeout = 60;    // for the ranks started
  bool validate = false;
  // Flags to hand a `profile --ranks` run: the workload's and the profile's
  // (planner, budget, warm-up, timed steps, seed), without method, batches
  // or threads.
  std::vector<std::string> profile_args;
};

// "2,4" -> {2, 4}; UsageError naming --ranks otherwise.
std::vector<int> parse_rank_counts(const std::string& text);

// Prints the table and returns it as JSON (advise's "ranks" field).
nlohmann::json advise_ranks(const predict::Advice& advice, const Workload& workload, const ProfileRequest& request,
                            const RankAdviceRequest& ranks);

}  // namespace memtrain::cli
