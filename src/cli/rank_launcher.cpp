#include "cli/rank_launcher.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cli/memtrain_program.h"
#include "core/error.h"
#include "runtime/comm/rank_group.h"

extern char** environ;

namespace memtrain::cli {

namespace {

using Clock = std::chrono::steady_clock;

pid_t start_rank(const std::string& program, std::vector<std::string> argv, const std::string& command) {
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = 0;
  const int r = posix_spawn(&pid, program.c_str(), nullptr, nullptr, raw.data(), environ);
  if (r != 0) throw Error(command + ": cannot start " + program + ": " + std::strerror(r));
  return pid;
}

}  // namespace

int launch_ranks(const std::vector<std::string>& command, const std::vector<std::string>& args, int ranks,
                 Seconds timeout) {
  std::string name;
  for (const std::string& word : command) name += (name.empty() ? "" : " ") + word;
  const runtime::RendezvousHost store("127.0.0.1", ranks, timeout);
  const std::string program = memtrain_program();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> argv{program};
    argv.insert(argv.end(), command.begin(), command.end());
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a :
         {std::string("--rank"), std::to_string(r), std::string("--world"), std::to_string(ranks),
          std::string("--master"), "127.0.0.1:" + std::to_string(store.port()), std::string("--launched")})
      argv.push_back(a);
    try {
      pids.push_back(start_rank(program, argv, name));
    } catch (...) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw;
    }
  }
  // Every rank ends on its own: a failed peer makes the others fail within
  // twice the timeout. The launcher waits that long past the first failure
  // (and a little more), then stops what is left.
  int status = 0;
  int first_failed = -1;
  Clock::time_point failed_at;
  std::vector<bool> ended(ranks, false);
  int left = ranks;
  while (left > 0) {
    bool reaped = false;
    for (int r = 0; r < ranks; ++r) {
      if (ended[r]) continue;
      int s = 0;
      if (::waitpid(pids[r], &s, WNOHANG) != pids[r]) continue;
      ended[r] = true;
      --left;
      reaped = true;
      const int code = WIFEXITED(s) ? WEXITSTATUS(s) : 1;
      if (code == 0) continue;
      if (WIFSIGNALED(s)) std::fprintf(stderr, "memtrain: rank %d was killed by signal %d\n", r, WTERMSIG(s));
      if (first_failed < 0) {
        first_failed = r;
        failed_at = Clock::now();
        status = code;
        const std::string why = store.failure_of(r);
        if (!why.empty()) std::fprintf(stderr, "memtrain: rank %d failed: %s\n", r, why.c_str());
      }
    }
    if (first_failed >= 0 && left > 0 && Clock::now() - failed_at > std::chrono::duration<double>(2 * timeout + 10)) {
      for (int r = 0; r < ranks; ++r) {
        if (ended[r]) continue;
        std::fprintf(stderr, "memtrain: rank %d did not end after rank %d failed; stopping it\n", r, first_failed);
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        ended[r] = true;
        --left;
      }
    }
    if (!reaped && left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

}  // namespace memtrain::cli
