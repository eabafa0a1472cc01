#include "runtime/model/classification_loss.h"

#include <torch/torch.h>

namespace memtrain::runtime {

torch::Tensor classification_loss(const torch::Tensor& logits, StepContext& ctx) {
  const int64_t classes = logits.size(-1);
  const torch::Tensor flat_logits = logits.reshape({-1, classes});
  const torch::Tensor flat_targets = ctx.targets.reshape({-1});
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor counted = flat_targets.ne(kIgnoreTarget);
    ctx.count(flat_logits.argmax(-1).eq(flat_targets).logical_and_(counted).sum(), counted.sum());
  }
  return torch::cross_entropy_loss(flat_logits, flat_targets, {}, at::Reduction::Mean, kIgnoreTarget);
}

namespace {

// y = x * keep / (1 - p), keeping the mask as bool for the backward: one
// byte per element instead of the four a float mask (x * mask) would keep.
class MaskedScale : public torch::autograd::Function<MaskedScale> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& keep,
                               double scale) {
    ctx->save_for_backward({keep});
    ctx->saved_data["scale"] = scale;
    return apply_mask(x, keep, scale);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor keep = ctx->get_saved_variables()[0];
    return {apply_mask(grads[0], keep, ctx->saved_data["scale"].toDouble()), torch::Tensor(), torch::Tensor()};
  }
  static torch::Tensor apply_mask(const torch::Tensor& t, const torch::Tensor& keep, double scale) {
    return t.masked_fill(keep.logical_not(), 0).mul_(scale);
  }
};

}  // namespace

torch::Tensor step_dropout_mask(c10::IntArrayRef sizes, const torch::TensorOptions& options, double p,
                                StepContext& ctx) {
  if (!ctx.training || p <= 0) return {};
  return torch::empty(sizes, options.dtype(torch::kBool)).bernoulli_(1.0 - p, ctx.generator);
}

torch::Tensor step_dropout(const torch::Tensor& x, double p, StepContext& ctx) {
  const torch::Tensor keep = step_dropout_mask(x.sizes(), x.options(), p, ctx);
  if (!keep.defined()) return x;
  return MaskedScale::apply(x, keep, 1.0 / (1.0 - p));
}

}  // namespace memtrain::runtime
