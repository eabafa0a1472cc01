// A stage: one link of the chain a model is cut into. It maps the previous
// stage's output to its own; the last stage returns the scalar loss.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "runtime/model/step_context.h"

namespace memtrain::runtime {

class StageModule : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  virtual torch::Tensor forward(const torch::Tensor& input, StepContext& ctx) = 0;
  // Other implementations of the stage (operator variants) beyond the plain
  // one, which is variant 0; ctx.variant selects one. Each computes the same
  // function and gradients but keeps less for its backward, by recomputing:
  // never faster than the plain stage (the predictor relies on it).
  virtual std::vector<std::string> variant_names() const { return {}; }
  // The tensors whose gradients its backward hands over where they are
  // taken (StepContext::take_gradients): its parameters, unless the stage
  // knows better (a Python block: the parameters of its current call).
  virtual std::vector<torch::Tensor> gradient_leaves() { return parameters(); }
  // The stage's other results of its last forward (a router's logits a
  // loss reads besides the output): where the caller hands their
  // gradients (StepContext::extra_output_gradients), the backward starts
  // from them with the output's. None by default.
  virtual std::vector<torch::Tensor> extra_outputs() { return {}; }
  // Whether its input gets a gradient: not where nothing before the stage
  // needs one (frozen embeddings and blocks), as autograd would compute
  // none there, nor keep anything for it.
  virtual bool input_needs_gradient() const { return true; }
};

}  // namespace memtrain::runtime
