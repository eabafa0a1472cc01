#include "cli/memtrain_program.h"

#include <unistd.h>

#include "core/error.h"

namespace memtrain::cli {

std::string memtrain_program() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw Error("cannot find the memtrain executable (/proc/self/exe)");
  path[n] = '\0';
  return path;
}

}  // namespace memtrain::cli
