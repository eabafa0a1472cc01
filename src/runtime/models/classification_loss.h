// Cross-entropy over the last dimension with -100 as "ignore", plus the
// accuracy the progress bar shows (counted without grad).
#pragma once

#include <torch/types.h>

#include "runtime/step_context.h"

namespace memtrain::runtime {

torch::Tensor classification_loss(const torch::Tensor& logits, StepContext& ctx);

// Inverted dropout drawing from the step's generator, keeping a bool mask
// for the backward; identity when not training or p == 0.
torch::Tensor step_dropout(const torch::Tensor& x, double p, StepContext& ctx);

}  // namespace memtrain::runtime
