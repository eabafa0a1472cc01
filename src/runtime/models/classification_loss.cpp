#include "runtime/models/classification_loss.h"

#include <torch/torch.h>

namespace memtrain::runtime {

torch::Tensor classification_loss(const torch::Tensor& logits, StepContext& ctx) {
  const int64_t classes = logits.size(-1);
  const torch::Tensor flat_logits = logits.reshape({-1, classes});
  const torch::Tensor flat_targets = ctx.targets.reshape({-1});
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor counted = flat_targets.ne(-100);
    ctx.correct = flat_logits.argmax(-1).eq(flat_targets).logical_and_(counted).sum().item<double>();
    ctx.counted = counted.sum().item<double>();
  }
  return torch::cross_entropy_loss(flat_logits, flat_targets, {}, at::Reduction::Mean, -100);
}

torch::Tensor step_dropout(const torch::Tensor& x, double p, StepContext& ctx) {
  if (!ctx.training || p <= 0) return x;
  const torch::Tensor keep = torch::empty_like(x).bernoulli_(1.0 - p, ctx.generator).div_(1.0 - p);
  return x * keep;
}

}  // namespace memtrain::runtime
