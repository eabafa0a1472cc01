#include "cli/help_text.h"

#include "cli/planner_flags.h"
#include "cli/profile_flags.h"
#include "cli/workload_flags.h"

namespace memtrain::cli {

std::string expand_help(const std::string& help) {
  std::string out = help;
  for (const auto& [marker, text] : {std::pair<std::string, const char*>{"WORKLOAD", kWorkloadHelp},
                                     std::pair<std::string, const char*>{"PROFILE", kProfileHelp}}) {
    const size_t at = out.find(marker);
    if (at != std::string::npos) out.replace(at, marker.size(), text);
  }
  return help_with_planners(out);
}

}  // namespace memtrain::cli
