// Benchmarks that need `memtrain` as separate processes (jobs side by side,
// or each with its own environment, such as another BLAS library) start it
// through these.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memtrain::bench {

// Starts `memtrain args...` with stdout and stderr in `log` and, beside this
// process's environment, `extra_env` ("NAME=value", replacing a NAME already
// set); returns its pid.
pid_t start_memtrain(const std::vector<std::string>& args, const std::string& log,
                     const std::vector<std::string>& extra_env = {});
// Waits for it; throws with its output when it failed.
void finish_memtrain(pid_t pid, const std::string& log);
void run_memtrain(const std::vector<std::string>& args, const std::string& log,
                  const std::vector<std::string>& extra_env = {});

nlohmann::json read_json_file(const std::string& path);

}  // namespace memtrain::bench
