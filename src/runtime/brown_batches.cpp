#include "runtime/brown_batches.h"

#include <torch/torch.h>

namespace memtrain::runtime {

BrownBatches::BrownBatches(std::shared_ptr<const data::TaggingDataset> data, std::int64_t batch_size,
                           std::uint64_t seed)
    : data_(std::move(data)), batcher_(*data_, batch_size, seed) {}

Batch BrownBatches::to_tensors(const data::TokenBatch& b, const torch::Device& device) {
  const std::vector<int64_t> shape{b.batch, b.length};
  auto copy = [&](const void* src, torch::ScalarType type) {
    return torch::from_blob(const_cast<void*>(src), shape, torch::TensorOptions().dtype(type))
        .to(device, /*non_blocking=*/false, /*copy=*/true);
  };
  Batch batch;
  batch.input = copy(b.words.data(), torch::kInt64);
  batch.targets = copy(b.tags.data(), torch::kInt64);
  batch.key_padding = copy(b.valid.data(), torch::kUInt8).eq(0);
  batch.signature = Signature::of_shape(shape);
  batch.examples = b.batch;
  return batch;
}

Batch BrownBatches::next(const torch::Device& device) { return to_tensors(batcher_.next(), device); }

Batch BrownBatches::largest(const torch::Device& device) { return to_tensors(batcher_.largest(), device); }

std::string BrownBatches::describe() const {
  return "Brown corpus: " + std::to_string(data_->sentences()) + " sentences, " +
         std::to_string(data_->words.size()) + " words, " + std::to_string(data_->tags.size()) + " tags";
}

}  // namespace memtrain::runtime
