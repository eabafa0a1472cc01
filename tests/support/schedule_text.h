// Schedules written the way Schedule::to_string() prints them
// ("Fck0 Fall1 Off1 L B1 Pre1 ..."), for tests worked out by hand.
#pragma once

#include <sstream>
#include <string>

#include "core/schedule.h"

namespace memtrain::testing {

inline Schedule parse_schedule(const std::string& text) {
  Schedule s;
  std::istringstream in(text);
  std::string t;
  while (in >> t) {
    auto stage = [&](size_t prefix) { return std::stoi(t.substr(prefix)); };
    if (t == "L") s.loss();
    else if (t.rfind("Fall", 0) == 0) s.forward_all(stage(4));
    else if (t.rfind("Fck", 0) == 0) s.forward_checkpoint(stage(3));
    else if (t.rfind("Fn", 0) == 0) s.forward_none(stage(2));
    else if (t.rfind("Off", 0) == 0) s.offload(stage(3));
    else if (t.rfind("Rel", 0) == 0) s.release(stage(3));
    else if (t.rfind("Pre", 0) == 0) s.prefetch(stage(3));
    else if (t.rfind("B", 0) == 0) s.backward(stage(1));
  }
  return s;
}

}  // namespace memtrain::testing
