#include "runtime/comm/tensor_buckets.h"

#include <algorithm>

#include <torch/torch.h>

namespace memtrain::runtime {

std::vector<std::vector<std::size_t>> tensor_buckets(const std::vector<torch::Tensor>& tensors, Bytes bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  Bytes filled = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Bytes bytes = static_cast<Bytes>(tensors[i].nbytes());
    const bool fits = !buckets.empty() && filled + bytes <= bucket_bytes &&
                      tensors[buckets.back().front()].scalar_type() == tensors[i].scalar_type();
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += bytes;
  }
  return buckets;
}

Bytes bucket_temporary_bytes(const std::vector<torch::Tensor>& tensors, bool ordered, Bytes bucket_bytes) {
  Bytes largest_copy = 0, largest_with_incoming = 0;
  for (const std::vector<std::size_t>& b : tensor_buckets(tensors, bucket_bytes)) {
    Bytes bytes = 0;
    for (std::size_t i : b) bytes += static_cast<Bytes>(tensors[i].nbytes());
    const Bytes copy = b.size() > 1 ? bytes : 0;  // a bucket of one tensor travels in place
    largest_copy = std::max(largest_copy, copy);
    largest_with_incoming = std::max(largest_with_incoming, copy + bytes);
  }
  return ordered ? largest_with_incoming + 2 * largest_copy : 4 * largest_copy;
}

torch::Tensor flatten_bucket(const std::vector<torch::Tensor>& tensors, const std::vector<std::size_t>& bucket) {
  if (bucket.size() == 1) return tensors[bucket.front()];
  torch::NoGradGuard no_grad;  // the tensors may be weights
  std::vector<torch::Tensor> parts;
  for (std::size_t i : bucket) parts.push_back(tensors[i].reshape({-1}));
  return torch::cat(parts);
}

void unflatten_bucket(const torch::Tensor& flat, std::vector<torch::Tensor>& tensors,
                      const std::vector<std::size_t>& bucket) {
  if (bucket.size() == 1) return;
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (std::size_t i : bucket) {
    torch::Tensor& t = tensors[i];
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace memtrain::runtime
