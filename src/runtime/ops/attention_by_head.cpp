#include "runtime/ops/attention_by_head.h"

#include <limits>

#include <torch/torch.h>

namespace memtrain::runtime {

namespace {

// Autograd functions take no undefined tensors: "none" travels as an empty one.
torch::Tensor or_empty(const torch::Tensor& t) { return t.defined() ? t : torch::empty({0}, torch::kBool); }
bool given(const torch::Tensor& t) { return t.numel() > 0; }
// Head h of a [B, H, ...] tensor; an empty "none" stays empty.
torch::Tensor head(const torch::Tensor& t, int64_t h) { return given(t) ? t.select(1, h) : t; }

torch::Tensor probabilities(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& padding) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1));
  if (given(padding)) scores.masked_fill_(padding, -std::numeric_limits<float>::infinity());
  return torch::softmax(scores, -1);
}

torch::Tensor dropped(const torch::Tensor& t, const torch::Tensor& keep, double scale) {
  return given(keep) ? t.masked_fill(keep.logical_not(), 0).mul_(scale) : t;
}

class AttentionByHead : public torch::autograd::Function<AttentionByHead> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& padding, const torch::Tensor& keep,
                               double scale, bool keep_probabilities) {
    // (apply() runs this without grad; the inputs say whether a backward will follow.)
    const bool grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
    // Heads first, so each head's probabilities are one contiguous [B, T, T].
    torch::Tensor kept;
    if (keep_probabilities && grad) kept = torch::empty({q.size(1), q.size(0), q.size(2), k.size(2)}, q.options());
    // One head at a time: the [B, T, T] temporaries of one head, not of all.
    torch::Tensor out = torch::empty_like(q);
    for (int64_t h = 0; h < q.size(1); ++h) {
      const torch::Tensor probs = probabilities(head(q, h), head(k, h), head(padding, 0));
      if (kept.defined()) kept[h].copy_(probs);
      out.select(1, h).copy_(torch::matmul(dropped(probs, head(keep, h), scale), head(v, h)));
    }
    // Through save_for_backward, so saved-tensor hooks (offload) see them all.
    ctx->save_for_backward({q, k, v, keep, or_empty(kept)});
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &keep = saved[3], &kept = saved[4];
    const torch::Tensor padding = head(ctx->saved_data["padding"].toTensor(), 0);  // [B, 1, T]
    const double scale = ctx->saved_data["scale"].toDouble();
    const torch::Tensor& go = grads[0];
    torch::Tensor grad_q = torch::empty_like(q), grad_k = torch::empty_like(k), grad_v = torch::empty_like(v);
    for (int64_t h = 0; h < q.size(1); ++h) {
      const torch::Tensor qh = head(q, h), kh = head(k, h), vh = head(v, h), goh = head(go, h), keeph = head(keep, h);
      const torch::Tensor probs = given(kept) ? kept[h] : probabilities(qh, kh, padding);
      // matmul(kept, v): as autograd's matmul backward computes it.
      grad_v.select(1, h).copy_(torch::matmul(dropped(probs, keeph, scale).transpose(-2, -1), goh));
      const torch::Tensor grad_probs = dropped(torch::matmul(goh, vh.transpose(-2, -1)), keeph, scale);
      torch::Tensor grad_scores = torch::_softmax_backward_data(grad_probs, probs, -1, probs.scalar_type());
      if (given(padding)) grad_scores.masked_fill_(padding, 0);
      // matmul(q, kT) with kT = k^T.
      grad_q.select(1, h).copy_(torch::matmul(grad_scores, kh));
      grad_k.select(1, h).copy_(torch::matmul(qh.transpose(-2, -1), grad_scores).transpose(-2, -1));
    }
    return {grad_q, grad_k, grad_v, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor attention_by_head(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& padding, const torch::Tensor& keep, double scale,
                                bool keep_probabilities) {
  return AttentionByHead::apply(q, k, v, or_empty(padding), or_empty(keep), scale, keep_probabilities);
}

}  // namespace memtrain::runtime
