#include "core/graph_schedule.h"

namespace memtrain {

std::string GraphSchedule::to_string() const {
  std::string out;
  const int n = static_cast<int>(compute.size());
  for (int t = 0; t < n; ++t) {
    out += (t ? " | t" : "t") + std::to_string(t) + ":";
    std::string kept;
    for (int i = 0; i < t; ++i) {
      if (keep[t][i]) kept += (kept.empty() ? "" : ",") + std::to_string(i);
    }
    if (!kept.empty()) out += " keep " + kept + ";";
    for (int i = 0; i <= t; ++i) {
      if (!compute[t][i]) continue;
      out += " " + std::to_string(i);
      if (variant_of(i) != 0) out += ".v" + std::to_string(variant_of(i));
    }
  }
  return out;
}

}  // namespace memtrain
