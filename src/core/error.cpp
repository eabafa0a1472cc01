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

Infeasible below_least(Bytes budget, Bytes least, const std::string& planner, const std::string& what) {
  return Infeasible("budget " + format_bytes(budget) + " (" + std::to_string(budget) + " bytes) is below the minimum " +
                        format_bytes(least) + " (" + std::to_string(least) + " bytes) that planner " + planner +
                        " needs for " + what,
                    least);
}

}  // namespace memtrain
