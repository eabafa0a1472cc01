#include "runtime/ops/recomputed_segment.h"

#include <torch/torch.h>

namespace memtrain::runtime {

namespace {

class RecomputedSegment : public torch::autograd::Function<RecomputedSegment> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, int64_t segment,
                               bool update_buffers) {
    ctx->save_for_backward({x});
    ctx->saved_data["segment"] = segment;
    return reinterpret_cast<Segment*>(segment)->run_segment(x, update_buffers);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    auto* segment = reinterpret_cast<Segment*>(ctx->saved_data["segment"].toInt());
    torch::AutoGradMode grad_on(true);
    const torch::Tensor leaf = x.detach().requires_grad_(x.requires_grad());
    const torch::Tensor y = segment->run_segment(leaf, false);
    // Weights accumulate their gradients here, as in a plain backward.
    torch::autograd::backward({y}, {grads[0]});
    return {leaf.requires_grad() ? leaf.grad() : torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor run_recomputed(Segment& segment, const torch::Tensor& x, bool update_buffers) {
  if (!torch::GradMode::is_enabled()) return segment.run_segment(x, update_buffers);
  return RecomputedSegment::apply(x, reinterpret_cast<int64_t>(&segment), update_buffers);
}

}  // namespace memtrain::runtime
