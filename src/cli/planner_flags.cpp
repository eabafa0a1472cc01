#include "cli/planner_flags.h"

#include <cstdint>

#include "core/error.h"
#include "plan/registry.h"

namespace memtrain::cli {

std::string planner_list() {
  std::string out;
  for (const std::string& n : plan::planner_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string help_with_planners(const std::string& help) {
  std::string out = help;
  const size_t at = out.find("PLANNERS");
  if (at != std::string::npos) out.replace(at, 8, planner_list());
  return out;
}

plan::PlannerOptions parse_planner_options(Flags& flags) {
  if (flags.has("slots") && flags.has("slot-bytes")) {
    throw UsageError("give --slots N or --slot-bytes N, not both");
  }
  plan::PlannerOptions o;
  o.slots = flags.integer("slots", o.slots, 1, 100000);
  o.slot_bytes = flags.integer("slot-bytes", 0, 1, INT64_MAX);
  return o;
}

}  // namespace memtrain::cli
