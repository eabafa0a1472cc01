// Typed errors. User-facing problems (bad flags, bad files, budgets that
// cannot be met) throw a memtrain::Error whose message starts with where it
// came from and names the value; internal invariants use assert instead.
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

}  // namespace memtrain
