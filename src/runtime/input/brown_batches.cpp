#include "runtime/input/brown_batches.h"

#include <torch/torch.h>

namespace memtrain::runtime {

BrownBatches::BrownBatches(std::shared_ptr<const data::TaggingDataset> data, std::int64_t batch_size,
                           std::uint64_t seed, BrownTargets targets)
    : targets_(targets), data_(std::move(data)), batcher_(*data_, batch_size, seed) {}

std::vector<std::int64_t> BrownBatches::next_words(const data::TokenBatch& b) {
  std::vector<std::int64_t> next(b.words.size(), data::TokenBatch::kIgnoreTag);
  for (std::int64_t s = 0; s < b.batch; ++s) {
    for (std::int64_t t = 0; t + 1 < b.length; ++t) {
      const std::size_t at = static_cast<std::size_t>(s * b.length + t);
      if (b.valid[at] && b.valid[at + 1]) next[at] = b.words[at + 1];
    }
  }
  return next;
}

Batch BrownBatches::to_tensors(const data::TokenBatch& b, const torch::Device& device, BrownTargets targets) {
  const std::vector<int64_t> shape{b.batch, b.length};
  auto copy = [&](const void* src, torch::ScalarType type) {
    return torch::from_blob(const_cast<void*>(src), shape, torch::TensorOptions().dtype(type))
        .to(device, /*non_blocking=*/false, /*copy=*/true);
  };
  Batch batch;
  batch.input = copy(b.words.data(), torch::kInt64);
  if (targets == BrownTargets::NextWord) {
    const std::vector<std::int64_t> next = next_words(b);
    batch.targets = copy(next.data(), torch::kInt64);
  } else {
    batch.targets = copy(b.tags.data(), torch::kInt64);
  }
  batch.key_padding = copy(b.valid.data(), torch::kUInt8).eq(0);
  batch.signature = Signature::of_shape(shape);
  batch.examples = b.batch;
  return batch;
}

Batch BrownBatches::next(const torch::Device& device) { return to_tensors(batcher_.next(), device, targets_); }

Batch BrownBatches::largest(const torch::Device& device) { return to_tensors(batcher_.largest(), device, targets_); }

std::string BrownBatches::describe() const {
  return std::string(targets_ == BrownTargets::NextWord ? "Brown corpus, next word: " : "Brown corpus: ") +
         std::to_string(data_->sentences()) + " sentences, " + std::to_string(data_->words.size()) + " words, " +
         std::to_string(data_->tags.size()) + " tags";
}

}  // namespace memtrain::runtime
