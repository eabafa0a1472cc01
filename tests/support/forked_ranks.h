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
#include <stdexcept>
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
  char dir_template[] = "/tmp/memtrain-ranks-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  // The ranks are forked before the launcher serves the store: a fork
  // copies only the forking thread, and a lock the store's thread held then
  // (glibc's resolver, naming a peer that just connected) would stay held
  // in the child forever. Each rank waits for the port on a pipe.
  std::vector<pid_t> pids;
  std::vector<int> port_pipes;
  for (int r = 0; r < world; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("run_ranks: pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {
      ::close(fds[1]);
      for (const int earlier : port_pipes) ::close(earlier);  // a launcher that dies ends every rank's wait
      std::ofstream out(dir + "/" + std::to_string(r));
      int code = 0;
      try {
        int port = 0;
        if (::read(fds[0], &port, sizeof port) != static_cast<ssize_t>(sizeof port)) {
          throw std::runtime_error("rank " + std::to_string(r) + " got no port from its launcher");
        }
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
    ::close(fds[0]);
    pids.push_back(pid);
    port_pipes.push_back(fds[1]);
  }
  std::optional<runtime::RendezvousHost> host;
  int port = 0;
  try {
    if (store == StoreHost::kLauncher) host.emplace("127.0.0.1", world, timeout);
    port = host ? host->port() : runtime::free_loopback_port();
  } catch (...) {
    for (const int fd : port_pipes) ::close(fd);  // the ranks read no port, and end
    for (const pid_t pid : pids) waitpid(pid, nullptr, 0);
    throw;
  }
  for (const int fd : port_pipes) {
    if (::write(fd, &port, sizeof port) != static_cast<ssize_t>(sizeof port)) {
      throw std::runtime_error("run_ranks: cannot hand a rank its port");
    }
    ::close(fd);
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
