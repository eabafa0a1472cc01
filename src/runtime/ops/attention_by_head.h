// Attention's core, softmax(q k^T) v with dropout on the probabilities,
// computed one head at a time, whatever it keeps for its backward:
// - `keep_probabilities`: it keeps q, k, v, the dropout mask and the
//   probabilities (the plain layer);
// - otherwise it keeps q, k, v and the mask and recomputes each head's
//   probabilities in the backward, instead of keeping [B, H, T, T] of them
//   (MONeT's leaner variant); its temporaries are one head's [B, T, T].
// Both ways, and without grad, every value comes from the same per-head
// kernels, so outputs and gradients are bit for bit the same. A batched
// matmul over all heads is not: on some CPUs (AVX-512 BLAS kernels) it adds
// in another order than one head's matmul for some shapes.
#pragma once

#include <torch/types.h>

namespace memtrain::runtime {

// q, k, v: [B, H, T, D] (q already scaled). padding: [B, 1, 1, T] bool, true
// where a key is padding, or undefined. keep: [B, H, T, T] bool dropout mask
// (drawn by the caller), or undefined for no dropout; scale is 1 / (1 - p).
// Returns [B, H, T, D].
torch::Tensor attention_by_head(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& padding, const torch::Tensor& keep, double scale,
                                bool keep_probabilities);

}  // namespace memtrain::runtime
