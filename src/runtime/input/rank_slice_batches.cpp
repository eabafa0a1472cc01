#include "runtime/input/rank_slice_batches.h"

#include "core/error.h"

namespace memtrain::runtime {

RankSliceBatches::RankSliceBatches(std::unique_ptr<BatchSource> global, int rank, int ranks)
    : global_(std::move(global)), rank_(rank), ranks_(ranks) {
  if (ranks_ < 1 || rank_ < 0 || rank_ >= ranks_) {
    throw UsageError("rank " + std::to_string(rank_) + " is out of range for " + std::to_string(ranks_) +
                     " ranks; expected 0.." + std::to_string(ranks_ - 1));
  }
}

Batch RankSliceBatches::slice(const Batch& global) const {
  Batch b = batch_rows(global, rank_, ranks_);
  b.input = b.input.clone();
  b.targets = b.targets.clone();
  if (b.key_padding.defined()) b.key_padding = b.key_padding.clone();
  return b;
}

Batch RankSliceBatches::next(const torch::Device& device) { return slice(global_->next(device)); }

Batch RankSliceBatches::largest(const torch::Device& device) { return slice(global_->largest(device)); }

std::string RankSliceBatches::describe() const {
  return global_->describe() + "; rank " + std::to_string(rank_) + " of " + std::to_string(ranks_) +
         " keeps its slice of each";
}

}  // namespace memtrain::runtime
