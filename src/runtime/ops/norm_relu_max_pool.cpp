#include "runtime/ops/norm_relu_max_pool.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

// Flat plane indices -> row * kernel + column within each output's window,
// one byte each.
torch::Tensor to_offsets(const torch::Tensor& indices, const PoolWindow& w, std::int64_t in_w) {
  const torch::Tensor idx = indices.contiguous();
  torch::Tensor offsets = torch::empty(idx.sizes(), idx.options().dtype(torch::kUInt8));
  const std::int64_t planes = idx.size(0) * idx.size(1), out_h = idx.size(2), out_w = idx.size(3);
  const std::int64_t* in = idx.data_ptr<std::int64_t>();
  std::uint8_t* out = offsets.data_ptr<std::uint8_t>();
  at::parallel_for(0, planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      for (std::int64_t oh = 0; oh < out_h; ++oh) {
        for (std::int64_t ow = 0; ow < out_w; ++ow) {
          const std::int64_t k = (p * out_h + oh) * out_w + ow;
          const std::int64_t row = in[k] / in_w - (oh * w.stride - w.padding);
          const std::int64_t col = in[k] % in_w - (ow * w.stride - w.padding);
          out[k] = static_cast<std::uint8_t>(row * w.kernel + col);
        }
      }
    }
  });
  return offsets;
}

// ReLU's and the pool's backward in one pass, into a zeroed gradient of the
// input: plane by plane, outputs in order, each adding its gradient where
// its window's maximum was, as the pool's own CPU kernel does; an output
// that is not positive passes +0, as ReLU's backward (threshold_backward)
// gives.
template <typename T>
void scatter_gradient(const torch::Tensor& grad_out, const torch::Tensor& out, const torch::Tensor& offsets,
                      const PoolWindow& w, torch::Tensor& grad_in) {
  const std::int64_t planes = out.size(0) * out.size(1), out_h = out.size(2), out_w = out.size(3);
  const std::int64_t in_h = grad_in.size(2), in_w = grad_in.size(3);
  const T* g = grad_out.data_ptr<T>();
  const T* o = out.data_ptr<T>();
  const std::uint8_t* off = offsets.data_ptr<std::uint8_t>();
  T* gi = grad_in.data_ptr<T>();
  at::parallel_for(0, planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      T* plane = gi + p * in_h * in_w;
      for (std::int64_t oh = 0; oh < out_h; ++oh) {
        for (std::int64_t ow = 0; ow < out_w; ++ow) {
          const std::int64_t k = (p * out_h + oh) * out_w + ow;
          const std::int64_t row = oh * w.stride - w.padding + off[k] / w.kernel;
          const std::int64_t col = ow * w.stride - w.padding + off[k] % w.kernel;
          plane[row * in_w + col] += o[k] <= T(0) ? T(0) : g[k];
        }
      }
    }
  });
}

torch::Tensor plain(StepBatchNorm& norm, const PoolWindow& w, const torch::Tensor& x, bool update_buffers) {
  torch::Tensor h = norm.forward(x, true, update_buffers);
  h.relu_();
  return at::max_pool2d(h, {w.kernel, w.kernel}, {w.stride, w.stride}, {w.padding, w.padding});
}

class NormReluMaxPool : public torch::autograd::Function<NormReluMaxPool> {
 public:
  // The weights are inputs only so that autograd hands their gradients to
  // backward.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& /*weight*/, const torch::Tensor& /*bias*/, int64_t norm,
                               int64_t kernel, int64_t stride, int64_t padding, bool update_buffers) {
    auto& n = *reinterpret_cast<StepBatchNorm*>(norm);
    const PoolWindow w{kernel, stride, padding};
    NormRun run = n.run(x, update_buffers);
    torch::Tensor h = std::move(run.output).relu_();
    auto [out, indices] = at::max_pool2d_with_indices(h, {kernel, kernel}, {stride, stride}, {padding, padding});
    h = torch::Tensor();
    const torch::Tensor offsets = to_offsets(indices, w, x.size(3));
    indices = torch::Tensor();
    ctx->save_for_backward({x, out, offsets, run.mean, run.invstd, run.reserve});
    ctx->saved_data["norm"] = norm;
    ctx->saved_data["impl"] = run.impl;
    ctx->saved_data["kernel"] = kernel;
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    torch::NoGradGuard no_grad;
    auto& norm = *reinterpret_cast<StepBatchNorm*>(ctx->saved_data["norm"].toInt());
    const PoolWindow w{ctx->saved_data["kernel"].toInt(), ctx->saved_data["stride"].toInt(),
                       ctx->saved_data["padding"].toInt()};
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& out = saved[1];
    NormRun run;
    run.mean = saved[3];
    run.invstd = saved[4];
    run.reserve = saved[5];
    run.impl = ctx->saved_data["impl"].toInt();
    const torch::Tensor g_out = grads[0].contiguous();
    torch::Tensor g_h = torch::zeros(x.sizes(), g_out.options());
    AT_DISPATCH_FLOATING_TYPES(g_out.scalar_type(), "norm_relu_max_pool_backward",
                               [&] { scatter_gradient<scalar_t>(g_out, out, saved[2], w, g_h); });
    auto [g_x, g_weight, g_bias] = norm_backward(run, x, g_h, norm.weight());
    return {g_x,
            g_weight,
            g_bias,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor norm_relu_max_pool_keeping_offsets(StepBatchNorm& norm, const PoolWindow& window, const torch::Tensor& x,
                                                 bool update_buffers) {
  // The offsets' kernels are CPU ones: elsewhere this runs plain.
  if (!torch::GradMode::is_enabled() || !x.device().is_cpu()) return plain(norm, window, x, update_buffers);
  MEMTRAIN_ASSERT(window.kernel >= 1 && window.kernel <= 16, "norm_relu_max_pool: kernel must be 1..16");
  MEMTRAIN_ASSERT(x.dim() == 4 && x.is_contiguous(),
                  "norm_relu_max_pool: input must be a contiguous N x C x H x W tensor");
  return NormReluMaxPool::apply(x, norm.weight(), norm.bias(), reinterpret_cast<int64_t>(&norm), window.kernel,
                                window.stride, window.padding, update_buffers);
}

}  // namespace memtrain::runtime
