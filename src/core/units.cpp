#include "core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace memtrain {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string format_number(const char* printf_format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, value);
  return buf;
}

namespace {

// Splits "1.5 MiB" into 1.5 and "MiB": plain decimal digits with at most one
// point, then an optional unit. False when no such number leads.
bool split_number(const std::string& text, double* number, std::string* unit) {
  const std::string t = trim(text);
  size_t i = 0, digits = 0, points = 0;
  for (; i < t.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(t[i])))
      ++digits;
    else if (t[i] == '.' && points == 0)
      ++points;
    else
      break;
  }
  if (digits == 0) return false;
  *number = std::stod(t.substr(0, i));
  *unit = trim(t.substr(i));
  return true;
}

}  // namespace

OutOfBudget::OutOfBudget(const std::string& pool, Bytes request, Bytes live, Bytes budget)
    : Error(pool + " memory: allocating " + std::to_string(request) + " bytes with " + std::to_string(live) +
            " bytes live would exceed the budget of " + std::to_string(budget) + " bytes (" + format_bytes(budget) +
            ")"),
      request_(request), live_(live), budget_(budget) {}

Bytes parse_bytes(const std::string& text, const std::string& what) {
  double number = 0;
  std::string unit;
  const std::string valid =
      "expected a whole number of bytes such as 4096, 512KiB, 64MiB or 2GiB (KiB, MiB, GiB, TiB and K, M, G, T "
      "are powers of 1024; kB, KB, MB, GB, TB powers of 1000)";
  if (!split_number(text, &number, &unit)) {
    throw UsageError(what + " '" + text + "' is not a size; " + valid);
  }
  static const std::pair<const char*, double> units[] = {{"", 1},         {"B", 1},      {"KiB", 0x1p10}, {"K", 0x1p10},
                                                         {"MiB", 0x1p20}, {"M", 0x1p20}, {"GiB", 0x1p30}, {"G", 0x1p30},
                                                         {"TiB", 0x1p40}, {"T", 0x1p40}, {"kB", 1e3},     {"KB", 1e3},
                                                         {"MB", 1e6},     {"GB", 1e9},   {"TB", 1e12}};
  double scale = 0;
  for (const auto& [name, value] : units) {
    if (unit == name) scale = value;
  }
  if (scale == 0) throw UsageError(what + " '" + text + "' has unknown unit '" + unit + "'; " + valid);
  const double bytes = number * scale;
  if (bytes < 1 || bytes > 9.0e18) {
    throw UsageError(what + " '" + text + "' is out of range; expected at least 1 byte");
  }
  if (bytes != std::floor(bytes)) {
    throw UsageError(what + " '" + text + "' is " + format_number("%.6g", bytes) + " bytes, not a whole number; " +
                     valid);
  }
  return static_cast<Bytes>(bytes);
}

double parse_bandwidth(const std::string& text, const std::string& what) {
  const std::string t = trim(text);
  if (t.size() < 3 || t.compare(t.size() - 2, 2, "/s") != 0) {
    throw UsageError(what + " '" + text +
                     "' is not a bandwidth; expected a size per second such as 25GB/s or 800MiB/s");
  }
  return static_cast<double>(parse_bytes(t.substr(0, t.size() - 2), what));
}

std::string format_bytes(Bytes bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  const double mag = std::fabs(b);
  if (mag >= GiB)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / GiB);
  else if (mag >= MiB)
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / MiB);
  else if (mag >= KiB)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / KiB);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

std::string format_bytes_beside(Bytes bytes, Bytes other) {
  const std::string shown = format_bytes(bytes);
  if (bytes == other || shown != format_bytes(other)) return shown;
  return shown + " (" + std::to_string(bytes) + " bytes)";
}

Bytes BudgetSpec::resolve(Bytes reference_peak) const {
  if (!is_percent) return bytes;
  return static_cast<Bytes>(std::floor(static_cast<double>(reference_peak) * percent / 100.0));
}

std::string BudgetSpec::describe() const {
  if (!is_percent) return format_bytes(bytes);
  std::ostringstream os;
  os << percent << "%";
  return os.str();
}

BudgetSpec parse_budget(const std::string& text, const std::string& what) {
  BudgetSpec spec;
  const std::string t = trim(text);
  if (!t.empty() && t.back() == '%') {
    double number = 0;
    std::string unit;
    if (!split_number(t.substr(0, t.size() - 1), &number, &unit) || !unit.empty() || !(number > 0 && number <= 100)) {
      throw UsageError(what + " '" + text + "' is not a valid percentage; expected N% with 0 < N <= 100");
    }
    spec.is_percent = true;
    spec.percent = number;
    return spec;
  }
  try {
    spec.bytes = parse_bytes(t, what);
  } catch (const UsageError& e) {
    throw UsageError(std::string(e.what()) + "; or N% with 0 < N <= 100");
  }
  return spec;
}

}  // namespace memtrain
