// Wall time elapsed since a steady-clock reading, in the Seconds every
// measurement in memtrain reports.
#pragma once

#include <chrono>

#include "core/units.h"

namespace memtrain {

inline Seconds seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace memtrain
