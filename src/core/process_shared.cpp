#include "core/process_shared.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace memtrain {

bool process_gone(std::int32_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return false;
  char state = 0;
  // pid (comm) state ...; comm may hold spaces, so the state follows the last ')'.
  char line[512];
  const size_t n = std::fread(line, 1, sizeof(line) - 1, f);
  std::fclose(f);
  line[n] = '\0';
  if (const char* close = std::strrchr(line, ')'); close && close[1] == ' ') state = close[2];
  return state == 'Z' || state == 'X';
}

void init_process_shared_mutex(pthread_mutex_t* mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

void lock_process_shared_mutex(pthread_mutex_t* mutex, const std::string& what) {
  const int r = pthread_mutex_lock(mutex);
  if (r == EOWNERDEAD)
    pthread_mutex_consistent(mutex);
  else if (r != 0)
    throw Error(what + ": cannot lock the group: " + std::strerror(r));
}

}  // namespace memtrain
