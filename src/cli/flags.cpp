#include "cli/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace memtrain::cli {

Flags::Flags(const std::vector<std::string>& args, const std::set<std::string>& switches, std::string command)
    : command_(std::move(command)) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      throw UsageError(command_ + ": unexpected argument '" + a + "'; flags look like --name value");
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (switches.count(name)) {
      value = "1";
    } else if (i + 1 >= args.size() || args[i + 1].compare(0, 2, "--") == 0) {
      // Whether this is a flag that lacks its value or a flag the command
      // does not know, only a lookup can tell (check_all_used()).
      if (!missing_value_.insert(name).second) throw UsageError(command_ + ": flag --" + name + " is given twice");
      continue;
    } else {
      value = args[++i];
    }
    if (values_.count(name) || missing_value_.count(name))
      throw UsageError(command_ + ": flag --" + name + " is given twice");
    values_[name] = value;
  }
}

bool Flags::has(const std::string& name) {
  used_.insert(name);
  if (missing_value_.count(name)) throw UsageError(command_ + ": flag --" + name + " needs a value");
  return values_.count(name) > 0;
}

std::string Flags::text(const std::string& name, const std::string& fallback) {
  return has(name) ? values_.at(name) : fallback;
}

std::int64_t Flags::integer(const std::string& name, std::int64_t fallback, std::int64_t min, std::int64_t max) {
  if (!has(name)) return fallback;
  const std::string& v = values_.at(name);
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(v.c_str(), &end, 10);
  const std::string range = "expected an integer in " + std::to_string(min) + ".." + std::to_string(max);
  if (v.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError("--" + name + " '" + v + "' is not an integer; " + range);
  }
  if (parsed < min || parsed > max) throw UsageError("--" + name + " " + v + " is out of range; " + range);
  return parsed;
}

double Flags::real(const std::string& name, double fallback, double min, double max) {
  if (!has(name)) return fallback;
  const std::string& v = values_.at(name);
  char* end = nullptr;
  const double parsed = std::strtod(v.c_str(), &end);
  char range_text[96];
  std::snprintf(range_text, sizeof range_text, "expected a number in [%g, %g]", min, max);
  const std::string range = range_text;
  if (v.empty() || *end != '\0' || !std::isfinite(parsed)) {
    throw UsageError("--" + name + " '" + v + "' is not a number; " + range);
  }
  if (parsed < min || parsed > max) throw UsageError("--" + name + " " + v + " is out of range; " + range);
  return parsed;
}

std::string Flags::choice(const std::string& name, const std::string& fallback,
                          const std::vector<std::string>& choices) {
  const std::string v = text(name, fallback);
  std::string known;
  for (const std::string& c : choices) {
    if (c == v) return v;
    known += (known.empty() ? "" : ", ") + c;
  }
  throw UsageError("--" + name + " '" + v + "' is not known; expected one of: " + known);
}

void Flags::check_all_used() const {
  std::set<std::string> given = missing_value_;
  for (const auto& [name, value] : values_) given.insert(name);
  for (const std::string& name : given) {
    if (!used_.count(name)) {
      throw UsageError(command_ + ": unknown flag --" + name + "; see memtrain " + command_ + " --help");
    }
  }
}

}  // namespace memtrain::cli
