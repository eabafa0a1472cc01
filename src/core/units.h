// Units used across memtrain: memory in bytes, time in seconds, and the
// parsing and printing of sizes and budgets as users write them.
#pragma once

#include <cstdint>
#include <string>

namespace memtrain {

using Bytes = std::int64_t;  // a memory amount, in bytes
using Seconds = double;      // a duration, in seconds

constexpr Bytes KiB = 1024;
constexpr Bytes MiB = 1024 * KiB;
constexpr Bytes GiB = 1024 * MiB;

// Parses "123", "64KiB", "1.5 MiB", "2GiB": KiB, MiB, GiB, TiB and K, M, G,
// T are powers of 1024; kB, KB, MB, GB and TB powers of 1000. A size that
// is not a whole number of bytes ("1.5") is refused.
// `what` names the input in the error, e.g. "--budget".
Bytes parse_bytes(const std::string& text, const std::string& what);

// Parses a copy bandwidth "25GB/s", "800MiB/s" or "3e10/s" (a size as for
// parse_bytes, per second) into bytes per second.
double parse_bandwidth(const std::string& text, const std::string& what);

// "12.3 MiB"-style rendering for humans; exact byte counts go in JSON.
std::string format_bytes(Bytes bytes);
// format_bytes(bytes), with the exact count beside it where `other`, a
// figure it is compared with, renders the same ("27.6 MiB (28934144 bytes)").
std::string format_bytes_beside(Bytes bytes, Bytes other);

// `value` printed with one printf conversion, e.g. format_number("%.1f", x).
std::string format_number(const char* printf_format, double value);

// `text` without leading and trailing white space.
std::string trim(const std::string& text);

// A budget as the user gave it: absolute bytes or a percentage of a reference
// (the unconstrained peak of the largest input).
struct BudgetSpec {
  bool is_percent = false;  // true: `percent` applies, else `bytes`
  double percent = 0.0;     // of the reference, in (0, 100]
  Bytes bytes = 0;          // absolute budget, > 0

  Bytes resolve(Bytes reference_peak) const;
  std::string describe() const;
};

BudgetSpec parse_budget(const std::string& text, const std::string& what);

}  // namespace memtrain
