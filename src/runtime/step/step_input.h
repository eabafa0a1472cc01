// What the module's steps make of the caller's tensors: the step's input as
// a batch.
#pragma once

#include <torch/torch.h>

#include "runtime/input/batch.h"

namespace memtrain::runtime {

// `x` as the first stage's input: a leaf of its own, so the planned backward
// stops at it and its gradient goes back to the caller's autograd rather
// than into the caller's graph. Its signature is x's shape.
Batch batch_of(const torch::Tensor& x);

}  // namespace memtrain::runtime
