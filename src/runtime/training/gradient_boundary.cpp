#include "runtime/training/gradient_boundary.h"

#include <torch/torch.h>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

// A scalar zero whose gradient with respect to `output` is `dy`, bit for
// bit: the Loss operation's gradient of one is not multiplied in.
class InjectGradient : public torch::autograd::Function<InjectGradient> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& output,
                               const torch::Tensor& dy) {
    ctx->saved_data["dy"] = dy;
    return torch::zeros({}, output.options());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list) {
    torch::Tensor dy = ctx->saved_data["dy"].toTensor();
    ctx->saved_data.erase("dy");  // its bytes go with the output's gradient
    return {dy, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor GradientBoundary::forward(const torch::Tensor& output, StepContext&) {
  MEMTRAIN_ASSERT(exchange_, "a step sets the gradient boundary's exchange before it runs");
  // A forward without grad (a collection step checkpoints every stage) is
  // not the one the Loss operation starts the backward from.
  if (!torch::GradMode::is_enabled()) return torch::zeros({}, output.options());
  torch::Tensor dy = exchange_(output);
  if (!dy.defined()) dy = torch::zeros_like(output);
  if (dy.sizes() != output.sizes()) {
    throw Error("the gradient of the loss has shape " + c10::str(dy.sizes()) + ", the model's output " +
                c10::str(output.sizes()));
  }
  return InjectGradient::apply(output, dy);
}

}  // namespace memtrain::runtime
