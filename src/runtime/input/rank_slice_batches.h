// One rank's share of a data-parallel job's batches: the source below
// makes each global batch (all ranks' rows, in the seeded order every rank
// shares), and this rank keeps its slice, rows r*b..(r+1)*b. What the ranks
// see together is the same for any number of ranks.
#pragma once

#include <memory>

#include "runtime/input/batch_source.h"

namespace memtrain::runtime {

class RankSliceBatches : public BatchSource {
 public:
  // `global` batches ranks x the per-rank batch; `rank` of `ranks` keeps its rows.
  RankSliceBatches(std::unique_ptr<BatchSource> global, int rank, int ranks);

  Batch next(const torch::Device& device) override;
  Batch largest(const torch::Device& device) override;
  std::string describe() const override;
  std::int64_t epoch() const override { return global_->epoch(); }
  std::int64_t batches_per_epoch() const override { return global_->batches_per_epoch(); }
  std::optional<PipelineCounters> pipeline_counters() const override { return global_->pipeline_counters(); }

 private:
  // This rank's rows, copied out so the global batch's memory goes at once.
  Batch slice(const Batch& global) const;

  std::unique_ptr<BatchSource> global_;
  int rank_;
  int ranks_;
};

}  // namespace memtrain::runtime
