// A step's attempts. An attempt that runs out of budget is caught here and
// nowhere else: every front end runs its step's schedule through
// run_attempts, and what it does between attempts (roll back, take the
// ladder's next schedule, or give up) is its `recover`.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/schedule.h"

namespace memtrain::runtime {

// Runs `attempt` until it returns, and returns what it returns. Each
// OutOfBudget it throws goes to `recover(const OutOfBudget&)`, which rolls
// the attempt back and prepares the next one, or throws to end the step.
// Anything else `attempt` throws goes on to the caller.
template <class Attempt, class Recover>
decltype(auto) run_attempts(Attempt&& attempt, Recover&& recover) {
  while (true) {
    try {
      return attempt();
    } catch (const OutOfBudget& why) {
      recover(why);
    }
  }
}

// One step's attempts so far: how many ran out of budget, and (a chain's
// step) the schedules they ran.
struct StepAttempts {
  std::vector<Schedule> failed;
  int retries = 0;

  // One more attempt ran out of budget (`why`): throws Error, naming
  // `where`, when `max_retries` stricter attempts have already run.
  void count_failure(int max_retries, const std::string& where, const OutOfBudget& why) {
    if (++retries > max_retries) {
      throw Error(where + " still ran out of budget after " + std::to_string(max_retries) +
                  " stricter schedules: " + why.what() + "; the budget must be larger");
    }
  }
};

}  // namespace memtrain::runtime
