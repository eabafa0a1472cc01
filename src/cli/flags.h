// Command-line flags: "--name value" or "--name=value", and bare switches.
// Every lookup names the flag and the valid range in its UsageError, and
// check_all_used() rejects flags the command does not know.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace memtrain::cli {

class Flags {
 public:
  // `switches`: flags that take no value. `command` names the command in errors.
  Flags(const std::vector<std::string>& args, const std::set<std::string>& switches, std::string command);

  bool has(const std::string& name);
  std::string text(const std::string& name, const std::string& fallback);
  std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t min, std::int64_t max);
  double real(const std::string& name, double fallback, double min, double max);
  // The value must be one of `choices`.
  std::string choice(const std::string& name, const std::string& fallback, const std::vector<std::string>& choices);
  void check_all_used() const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
  std::set<std::string> missing_value_;  // given last, or before another flag: a lookup says it needs a value
  std::set<std::string> used_;
};

}  // namespace memtrain::cli
