// Planners by name: `none`, `all`, `sqrt`, `static`, `mimose`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plan/planner.h"

namespace memtrain::plan {

// Throws UsageError "unknown planner 'x'; known: ..." for other names.
std::unique_ptr<Planner> make_planner(const std::string& name);
std::vector<std::string> planner_names();

}  // namespace memtrain::plan
