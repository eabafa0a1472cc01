// Where the trainer's batches come from: a dataset, batched with input sizes
// that change from step to step, turned into tensors on the device.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/input/batch.h"

namespace memtrain::runtime {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Tensors are allocated on `device`, charged to the caller's memory scope.
  virtual Batch next(const torch::Device& device) = 0;
  // The dataset's largest input, for budgets relative to it and for `static`.
  virtual Batch largest(const torch::Device& device) = 0;
  virtual std::string describe() const = 0;
  virtual std::int64_t epoch() const = 0;
  virtual std::int64_t batches_per_epoch() const = 0;
};

}  // namespace memtrain::runtime
