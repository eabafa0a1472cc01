// Fashion-MNIST batches as tensors: images [B, 1, S, S] resized to the
// batch's random scale S and normalised, labels [B]; signature B x 1 x S x S.
#pragma once

#include <memory>

#include "data/fashion_mnist.h"
#include "data/image_batcher.h"
#include "runtime/input/batch_source.h"

namespace memtrain::runtime {

class FashionMnistBatches : public BatchSource {
 public:
  FashionMnistBatches(std::shared_ptr<const data::ImageDataset> data, std::int64_t batch_size, std::int64_t min_scale,
                      std::int64_t max_scale, std::uint64_t seed);

  Batch next(const torch::Device& device) override;
  Batch largest(const torch::Device& device) override;
  std::string describe() const override;
  std::int64_t epoch() const override { return batcher_.epoch(); }
  std::int64_t batches_per_epoch() const override { return batcher_.batches_per_epoch(); }

  static Batch to_tensors(const data::ImageBatch& b, const torch::Device& device);

 private:
  std::shared_ptr<const data::ImageDataset> data_;
  data::ImageBatcher batcher_;
};

}  // namespace memtrain::runtime
