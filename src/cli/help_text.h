// Command help texts assembled from the shared flag descriptions: the
// markers WORKLOAD (workload_flags.h), PROFILE (profile_flags.h) and the word
// PLANNERS (planner_flags.h) are replaced where they appear.
#pragma once

#include <string>

namespace memtrain::cli {

std::string expand_help(const std::string& help);

}  // namespace memtrain::cli
