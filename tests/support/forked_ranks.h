// Real ranks for tests: forked processes meeting over loopback through a
// store the test serves, as `memtrain train --ranks N` does, or rank 0
// serves, as ranks started by hand do.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/comm/rank_group.h"

namespace memtrain::testing {

// Runs body(group) in `world` forked ranks; each child writes what it
// reports to a file and exits 0 on success, 1 on an exception (its message
// in the file). Returns the files' contents and the exit statuses.
struct RankOutcome {
  int status = -1;
  std::string text;
};

enum class StoreHost { kLauncher, kRankZero };

inline std::vector<RankOutcome> run_ranks(int world, Seconds timeout,
                                          const std::function<std::string(runtime::RankGroup&)>& body,
                                          const std::function<void(int rank)>& before = nullptr,
                                          StoreHost store = StoreHost::kLauncher) {
  std::optional<runtime::RendezvousHost> host;
  if (store == StoreHost::kLauncher) host.emplace("127.0.0.1", world, timeout);
  const int port = host ? host->port() : runtime::free_loopback_port();
  char dir_template[] = "/tmp/memtrain-ranks-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::ofstream out(dir + "/" + std::to_string(r));
      int code = 0;
      try {
        if (before) before(r);
        runtime::RankAddress a;
        a.port = port;
        a.rank = r;
        a.world = world;
        a.timeout = timeout;
        a.launcher_serves_store = store == StoreHost::kLauncher;
        runtime::RankGroup group(a);
        out << body(group);
      } catch (const std::exception& e) {
        out << e.what();
        code = 1;
      }
      out.close();
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<RankOutcome> outcomes(world);
  for (int r = 0; r < world; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    outcomes[r].status = status;
    std::ifstream in(dir + "/" + std::to_string(r));
    std::stringstream text;
    text << in.rdbuf();
    outcomes[r].text = text.str();
  }
  return outcomes;
}

}  // namespace memtrain::testing
