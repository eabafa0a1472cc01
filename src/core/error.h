// Two kinds of failure, kept apart:
// - what the input got wrong or could not avoid (bad flags, bad files,
//   budgets that cannot be met) throws a memtrain::Error whose message starts
//   with where it came from, names the value and says what would be valid;
// - a broken internal invariant (a bug in memtrain) fails MEMTRAIN_ASSERT,
//   which throws an InternalError naming the file, line and condition. It is
//   always on: unlike assert, Release builds keep it. It is not a
//   memtrain::Error, so nothing that handles bad input swallows it; the CLI
//   exits 70 for it and says it is a bug.
#pragma once

#include <stdexcept>
#include <string>

#include "core/units.h"

namespace memtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A command-line flag or value that is not valid; the CLI exits with status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A data file that is missing, truncated or not in the expected format.
class DataError : public Error {
 public:
  using Error::Error;
};

// An allocation that would take a memory pool over its budget. Thrown from
// inside LibTorch's allocator; the trainer catches it and retries the step.
class OutOfBudget : public Error {
 public:
  OutOfBudget(const std::string& pool, Bytes request, Bytes live, Bytes budget);
  Bytes request() const { return request_; }
  Bytes live() const { return live_; }
  Bytes budget() const { return budget_; }

 private:
  Bytes request_;  // bytes asked for by the failing allocation
  Bytes live_;     // bytes live in the pool when it was asked
  Bytes budget_;   // the pool's budget
};

// A budget below the least a planner needs: min_bytes() is that least, the
// budget to give instead.
class Infeasible : public Error {
 public:
  Infeasible(const std::string& what, Bytes min_bytes) : Error(what), min_bytes_(min_bytes) {}
  Bytes min_bytes() const { return min_bytes_; }

 private:
  Bytes min_bytes_;
};

// The one wording of that refusal, wherever a budget is checked: `budget`
// is below the `least` that planner `planner` needs for `what` ("input
// [4, 64]", "this chain"), both in bytes as well, so a script can read them.
Infeasible below_least(Bytes budget, Bytes least, const std::string& planner, const std::string& what);

// A broken invariant: a bug in memtrain, never the user's input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Throws InternalError "internal error at FILE:LINE: CONDITION (WHAT)".
[[noreturn]] void fail_internal(const char* file, int line, const char* condition, const std::string& what);

}  // namespace memtrain

// Checks an internal invariant; `what` (a string) says what it means.
#define MEMTRAIN_ASSERT(condition, what)                                               \
  do {                                                                                 \
    if (!(condition)) ::memtrain::fail_internal(__FILE__, __LINE__, #condition, what); \
  } while (false)
