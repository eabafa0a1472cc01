// Planners by name: `none`, `all`, `sqrt`, `static`, `mimose`, `optimal`, `joint`, `swap`, `tensile`,
// `swap-naive`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plan/planner.h"

namespace memtrain::plan {

// Throws UsageError "unknown planner 'x'; known: ..." for other names.
// `options` matter to the planners that discretise memory and are ignored
// by the others; UsageError for slots < 1, slot_bytes < 0 or micro_batches < 1.
std::unique_ptr<Planner> make_planner(const std::string& name, const PlannerOptions& options = {});
// What the planner of that name can do, without building it; the same
// UsageError for an unknown name.
const PlannerTraits& planner_traits(const std::string& name);
// The UsageError make_planner() throws for options out of range.
void check_planner_options(const PlannerOptions& options);
std::vector<std::string> planner_names();
// The planners that plan a chain whose weights stay on the device (all but
// those that need them in host memory).
std::vector<std::string> device_weight_planner_names();
// Throws UsageError when `planner` cannot plan a chain whose weights live
// where `weights_on_host` says: swap-naive needs them in host memory, and
// only the planners that fetch and drop weights can plan them there.
// `host_switch` says how the caller puts them there (the CLI names its flag).
void check_weights_placement(const std::string& planner, bool weights_on_host,
                             const std::string& host_switch = "weights_on_host");

}  // namespace memtrain::plan
