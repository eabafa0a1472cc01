// The cost model of one stage of a chain: what running it forward and
// backward costs in time and memory. Memory fields follow the persistent-chain
// model written out in src/plan/MEMORY_MODEL.md.
#pragma once

#include <string>
#include <vector>

#include "core/units.h"

namespace memtrain {

// Another implementation of a stage (MONeT's operator variants): the same
// function, keeping something else for its backward (a 1-bit mask instead of
// an input, an input instead of an output, nothing that can be recomputed).
// A forward without grad is the same for every variant, so only what a
// forward with grad and a backward cost differs.
struct StageVariant {
  std::string name;
  Seconds forward_time = 0;  // forward with grad
  Seconds backward_time = 0;
  Bytes saved_bytes = 0;  // s_i of this variant, output included
  Bytes forward_temp_bytes = 0;
  Bytes backward_temp_bytes = 0;
};

struct Stage {
  std::string name;
  Seconds forward_time = 0;             // one forward of this stage, s
  Seconds backward_time = 0;            // one backward of this stage, s
  Bytes input_bytes = 0;                // a_i: the stage's input activation
  Bytes saved_bytes = 0;                // s_i: kept by a forward with grad, output included
  Bytes forward_temp_bytes = 0;         // peak of a forward with grad above what it keeps
  Bytes nograd_forward_temp_bytes = 0;  // peak of a forward without grad above its output
  Bytes backward_temp_bytes = 0;        // peak of a backward above the input gradient it makes
  Bytes param_bytes = 0;                // weights, resident for the whole step
  Bytes state_bytes = 0;                // gradients and optimizer state of those weights
  Bytes grad_bytes = 0;                 // of state_bytes, the gradients: what weight swapping sends to host
  Seconds update_time = 0;              // the optimizer step for this stage's weights, on the host, s
  // Alternatives to the forward-with-grad and backward fields above, which
  // are variant 0 ("default"); variant v > 0 is variants[v - 1].
  std::vector<StageVariant> variants;

  int variant_count() const { return 1 + static_cast<int>(variants.size()); }
  // Variant v of this stage; v must be in 0..variant_count()-1.
  StageVariant variant(int v) const {
    if (v > 0) return variants[v - 1];
    return {"default", forward_time, backward_time, saved_bytes, forward_temp_bytes, backward_temp_bytes};
  }
};

}  // namespace memtrain
