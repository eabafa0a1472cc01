#include "runtime/input/fashion_mnist_batches.h"

#include <torch/torch.h>

namespace memtrain::runtime {

namespace {
// Fashion-MNIST's pixel mean and standard deviation on [0, 1].
constexpr double kMean = 0.2860, kStd = 0.3530;
}  // namespace

FashionMnistBatches::FashionMnistBatches(std::shared_ptr<const data::ImageDataset> data, std::int64_t batch_size,
                                         std::int64_t min_scale, std::int64_t max_scale, std::uint64_t seed)
    : data_(std::move(data)), batcher_(*data_, batch_size, min_scale, max_scale, seed) {}

Batch FashionMnistBatches::to_tensors(const data::ImageBatch& b, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const torch::Tensor raw =
      torch::from_blob(const_cast<uint8_t*>(b.pixels.data()), {b.batch, 1, b.rows, b.cols}, torch::kUInt8)
          .to(device, /*non_blocking=*/false, /*copy=*/true);
  torch::Tensor images = raw.to(torch::kFloat32).div_(255.0).sub_(kMean).div_(kStd);
  if (b.scale != b.rows || b.scale != b.cols) {
    images = torch::upsample_bilinear2d(images, {b.scale, b.scale}, /*align_corners=*/false);
  }
  Batch batch;
  batch.input = images;
  batch.targets = torch::from_blob(const_cast<int64_t*>(b.labels.data()), {b.batch}, torch::kInt64)
                      .to(device, /*non_blocking=*/false, /*copy=*/true);
  batch.signature = Signature::of_shape({b.batch, 1, b.scale, b.scale});
  batch.examples = b.batch;
  return batch;
}

Batch FashionMnistBatches::next(const torch::Device& device) { return to_tensors(batcher_.next(), device); }

Batch FashionMnistBatches::largest(const torch::Device& device) { return to_tensors(batcher_.largest(), device); }

std::string FashionMnistBatches::describe() const {
  return "Fashion-MNIST: " + std::to_string(data_->count) + " images " + std::to_string(data_->rows) + "x" +
         std::to_string(data_->cols) + ", " + std::to_string(data_->classes) + " classes";
}

}  // namespace memtrain::runtime
