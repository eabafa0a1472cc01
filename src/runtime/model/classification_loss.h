// Cross-entropy over the last dimension with kIgnoreTarget as "ignore", plus
// the accuracy the progress bar shows (counted without grad).
#pragma once

#include <torch/types.h>

#include "runtime/model/step_context.h"

namespace memtrain::runtime {

// The target of a position the loss skips (padding): cross_entropy's default
// ignore_index, and the batchers' data::TokenBatch::kIgnoreTag.
inline constexpr std::int64_t kIgnoreTarget = -100;

torch::Tensor classification_loss(const torch::Tensor& logits, StepContext& ctx);

// Inverted dropout drawing from the step's generator, keeping a bool mask
// for the backward; identity when not training or p == 0.
torch::Tensor step_dropout(const torch::Tensor& x, double p, StepContext& ctx);
// The keep mask step_dropout would draw for a tensor of these sizes, drawn
// the same way; undefined when step_dropout would be the identity.
torch::Tensor step_dropout_mask(c10::IntArrayRef sizes, const torch::TensorOptions& options, double p,
                                StepContext& ctx);

}  // namespace memtrain::runtime
