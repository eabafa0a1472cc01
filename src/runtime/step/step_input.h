// What the module's steps make of the caller's tensors: the step's input as
// a batch, and the parameters' gradients put back after a measurement.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "runtime/input/batch.h"

namespace memtrain::runtime {

// `x` as the first stage's input: a leaf of its own, so the planned backward
// stops at it and its gradient goes back to the caller's autograd rather
// than into the caller's graph. Its signature is x's shape.
Batch batch_of(const torch::Tensor& x);

// Each parameter's gradient as it was, put back when this goes (after a
// measurement). Holding the old gradients makes autograd accumulate out of
// place, so restoring them undoes the measurement exactly.
class GradientSnapshot {
 public:
  explicit GradientSnapshot(const std::vector<torch::Tensor>& params) : params_(params) {
    for (const torch::Tensor& p : params_) grads_.push_back(p.grad());
  }
  ~GradientSnapshot() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = grads_[i];
  }
  GradientSnapshot(const GradientSnapshot&) = delete;
  GradientSnapshot& operator=(const GradientSnapshot&) = delete;

 private:
  std::vector<torch::Tensor> params_, grads_;
};

}  // namespace memtrain::runtime
