// max_pool(relu(norm(x))) keeping, for its backward, x, the pooled output
// and one byte per output: where in its window the maximum was. A plain
// run keeps the rectified tensor (the pool's input, four times the output
// here) and 8-byte indices besides. Nothing is recomputed:
// - the pool's indices are rebuilt exactly from the window offsets;
// - ReLU's mask is read from the pooled output: a position gets gradient
//   only where it is some window's maximum, and there the rectified value
//   is that window's output, so output > 0 is ReLU's own test;
// - the backward scatters the gradient in the order the pool's own CPU
//   kernel adds it, so every gradient has the plain composition's bits.
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "runtime/ops/step_batch_norm.h"

namespace memtrain::runtime {

struct PoolWindow {
  std::int64_t kernel = 3, stride = 2, padding = 1;
};

// Training mode with grad: `norm` updates its running statistics only when
// `update_buffers`. Without grad this is the plain composition. `norm` must
// outlive the backward. The kernel may be at most 16 wide; `x` must be
// contiguous. Off the CPU (the offsets' kernels are CPU ones) and without
// grad this is the plain composition.
torch::Tensor norm_relu_max_pool_keeping_offsets(StepBatchNorm& norm, const PoolWindow& window, const torch::Tensor& x,
                                                 bool update_buffers);

}  // namespace memtrain::runtime
