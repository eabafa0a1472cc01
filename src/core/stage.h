// The cost model of one stage of a chain: what running it forward and
// backward costs in time and memory. Memory fields follow the persistent-chain
// model written out in src/plan/MEMORY_MODEL.md.
#pragma once

#include <string>

#include "core/units.h"

namespace memtrain {

struct Stage {
  std::string name;
  Seconds forward_time = 0;        // one forward of this stage, s
  Seconds backward_time = 0;       // one backward of this stage, s
  Bytes input_bytes = 0;           // a_i: the stage's input activation
  Bytes saved_bytes = 0;           // s_i: kept by a forward with grad, output included
  Bytes forward_temp_bytes = 0;    // peak of a forward with grad above what it keeps
  Bytes nograd_forward_temp_bytes = 0;  // peak of a forward without grad above its output
  Bytes backward_temp_bytes = 0;   // peak of a backward above the input gradient it makes
  Bytes param_bytes = 0;           // weights, resident for the whole step
  Bytes state_bytes = 0;           // gradients and optimizer state of those weights
};

}  // namespace memtrain
