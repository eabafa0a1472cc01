// What a planner returns: a Schedule with its simulated cost, or "infeasible"
// with the least budget the planner could have worked with. Infeasible is a
// normal outcome, not an error.
#pragma once

#include <string>

#include "core/schedule.h"
#include "core/units.h"

namespace memtrain {

struct Plan {
  bool feasible = false;
  Schedule schedule;           // the schedule considered; run it only when feasible
                               // (or when the planner ignores the budget)
  Bytes peak_bytes = 0;        // simulated peak of `schedule`
  Seconds time = 0;            // simulated time of `schedule`, s
  Bytes min_budget_bytes = 0;  // when infeasible: the least budget this planner needs
  std::string planner;         // the planner's name
  std::string note;            // why infeasible, or a short summary of the choice
};

}  // namespace memtrain
