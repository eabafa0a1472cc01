#include "runtime/input/largest_input_batches.h"

#include "runtime/memory/counting_allocator.h"

namespace memtrain::runtime {

namespace {

torch::Tensor copy_to(const torch::Tensor& t, const torch::Device& device) {
  return t.defined() ? t.to(device, /*non_blocking=*/false, /*copy=*/true) : t;
}

}  // namespace

LargestInputBatches::LargestInputBatches(std::unique_ptr<BatchSource> inner) : inner_(std::move(inner)) {}

Batch LargestInputBatches::next(const torch::Device& device) {
  // The kept copy is charged to no pool (it stands for data on disk); the
  // copies the steps get are charged to the caller's device as usual.
  if (!batch_) {
    PoolScope uncounted(nullptr);
    batch_ = inner_->largest(torch::kCPU);
  }
  Batch b = *batch_;
  b.input = copy_to(batch_->input, device);
  b.targets = copy_to(batch_->targets, device);
  b.key_padding = copy_to(batch_->key_padding, device);
  return b;
}

std::string LargestInputBatches::describe() const { return inner_->describe() + "; every step its largest input"; }

}  // namespace memtrain::runtime
