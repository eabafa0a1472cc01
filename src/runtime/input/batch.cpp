#include "runtime/input/batch.h"

namespace memtrain::runtime {

Bytes Batch::bytes() const {
  Bytes total = 0;
  for (const torch::Tensor* t : {&input, &targets, &key_padding}) {
    if (t->defined()) total += static_cast<Bytes>(t->nbytes());
  }
  return total;
}

}  // namespace memtrain::runtime
