#include "core/chain_scaling.h"

namespace memtrain {

void scale_activation_memory(Chain& chain, double factor) {
  auto scaled = [factor](Bytes b) { return static_cast<Bytes>(static_cast<double>(b) * factor); };
  for (Stage& s : chain.stages) {
    s.input_bytes = scaled(s.input_bytes);
    s.saved_bytes = scaled(s.saved_bytes);
    s.forward_temp_bytes = scaled(s.forward_temp_bytes);
    s.nograd_forward_temp_bytes = scaled(s.nograd_forward_temp_bytes);
    s.backward_temp_bytes = scaled(s.backward_temp_bytes);
    for (StageVariant& v : s.variants) {
      v.saved_bytes = scaled(v.saved_bytes);
      v.forward_temp_bytes = scaled(v.forward_temp_bytes);
      v.backward_temp_bytes = scaled(v.backward_temp_bytes);
    }
  }
}

}  // namespace memtrain
