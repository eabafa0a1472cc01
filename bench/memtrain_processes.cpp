#include "bench/memtrain_processes.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

extern char** environ;

namespace memtrain::bench {

pid_t start_memtrain(const std::vector<std::string>& args, const std::string& log,
                     const std::vector<std::string>& extra_env) {
  std::vector<std::string> all = {MEMTRAIN_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_strings = extra_env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    const std::string name(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
    bool replaced = false;
    for (const std::string& x : extra_env) replaced = replaced || x.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced) env_strings.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int r = posix_spawn(&pid, MEMTRAIN_BINARY, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (r != 0) throw Error(std::string("cannot start ") + MEMTRAIN_BINARY + ": " + std::strerror(r));
  return pid;
}

void finish_memtrain(pid_t pid, const std::string& log) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    throw Error("memtrain failed; its output (" + log + "):\n" + text.str());
  }
}

void run_memtrain(const std::vector<std::string>& args, const std::string& log,
                  const std::vector<std::string>& extra_env) {
  finish_memtrain(start_memtrain(args, log, extra_env), log);
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path);
  return nlohmann::json::parse(in);
}

}  // namespace memtrain::bench
