#include "core/error.h"

#include <string>

namespace memtrain {

void fail_internal(const char* file, int line, const char* condition, const std::string& what) {
  std::string where = file;
  // The path from src/ on, not the build machine's.
  const size_t src = where.rfind("src/");
  if (src != std::string::npos) where = where.substr(src);
  throw InternalError("internal error at " + where + ":" + std::to_string(line) + ": " + condition + " (" + what + ")");
}

}  // namespace memtrain
