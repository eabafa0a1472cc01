// Attention's core, softmax(q k^T) v with dropout on the probabilities, that
// keeps q, k, v and the dropout mask for its backward and recomputes the
// probabilities there instead of keeping two [B, H, T, T] tensors (the
// probabilities and their dropped-out copy). It works one head at a time, so
// its temporaries are one head's [B, T, T], not all heads'. The backward
// repeats the plain autograd's operations per head, so gradients are identical.
#pragma once

#include <torch/types.h>

namespace memtrain::runtime {

// q, k, v: [B, H, T, D] (q already scaled). padding: [B, 1, 1, T] bool, true
// where a key is padding, or undefined. keep: [B, H, T, T] bool dropout mask
// (drawn by the caller exactly as the plain path draws it), or undefined for
// no dropout; scale is 1 / (1 - p).
torch::Tensor attention_recomputing_softmax(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                            const torch::Tensor& padding, const torch::Tensor& keep, double scale);

}  // namespace memtrain::runtime
