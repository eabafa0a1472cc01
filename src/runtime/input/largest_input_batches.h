// A batch source that serves its inner source's largest input at every step:
// the input that decides whether a batch size fits, at a fixed shape, so
// profiling measures one size per batch size (PAPAYA's setting).
#pragma once

#include <memory>
#include <optional>

#include "runtime/input/batch_source.h"

namespace memtrain::runtime {

class LargestInputBatches : public BatchSource {
 public:
  explicit LargestInputBatches(std::unique_ptr<BatchSource> inner);

  // A fresh copy of the largest batch each call, so a step may not change
  // what the next one gets; building it once keeps data work out of the timing.
  Batch next(const torch::Device& device) override;
  Batch largest(const torch::Device& device) override { return next(device); }
  std::string describe() const override;
  std::int64_t epoch() const override { return 0; }
  std::int64_t batches_per_epoch() const override { return 1; }

 private:
  std::unique_ptr<BatchSource> inner_;
  std::optional<Batch> batch_;  // the largest batch, on the host, in no pool
};

}  // namespace memtrain::runtime
