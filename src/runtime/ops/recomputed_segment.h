// Part of a stage that keeps only its input for the backward: it runs
// without grad in the forward and again, with grad, when the backward
// reaches it (a checkpoint inside a stage, MONeT's "recompute" operator
// variant). Its weights get their gradients from that second run, by the
// same operations on the same data as a plain run, so they are identical.
#pragma once

#include <torch/types.h>

namespace memtrain::runtime {

class Segment {
 public:
  virtual ~Segment() = default;
  // The segment's function. `first_run` is true only for the forward pass
  // of the step's first forward: side effects (batch-norm running
  // statistics) happen then and never on the recomputation.
  virtual torch::Tensor run_segment(const torch::Tensor& x, bool first_run) = 0;
};

// segment(x), keeping only x. `segment` must outlive the backward (stage
// modules do: they live as long as the model).
torch::Tensor run_recomputed(Segment& segment, const torch::Tensor& x, bool update_buffers);

}  // namespace memtrain::runtime
