// The memtrain binary run as a user runs it, for end-to-end tests: the
// target defines MEMTRAIN_CLI as the binary's path.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>  // environ

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memtrain::testing {

// Runs `memtrain ARGS`, stdout and stderr to `log`; the exit status (-1: a signal).
inline int memtrain(const std::string& args, const std::string& log) {
  const int status = std::system((std::string(MEMTRAIN_CLI) + " " + args + " > '" + log + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Starts `memtrain ARGS` in the background, stdout and stderr to `log`; its pid (for kill and waitpid).
inline pid_t start_memtrain(const std::string& args, const std::string& log) {
  const std::string command = "exec " + std::string(MEMTRAIN_CLI) + " " + args + " > '" + log + "' 2>&1";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) return -1;
  return pid;
}

inline std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json json_of(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Each step's loss in a `memtrain train --json` report.
inline std::vector<double> losses(const nlohmann::json& train_report) {
  std::vector<double> out;
  for (const nlohmann::json& s : train_report.at("steps")) out.push_back(s.at("loss").get<double>());
  return out;
}

}  // namespace memtrain::testing
