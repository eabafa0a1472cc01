// Where the trainer's batches come from: a dataset, batched with input sizes
// that change from step to step, turned into tensors on the device.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/input/batch.h"

namespace memtrain::runtime {

// What a source's input pipeline did, told by the source itself.
struct PipelineCounters {
  std::string summary;             // one line: what was delivered or taken, skipped, and the CPU it cost
  std::vector<std::string> notes;  // further lines for the user (each sample skipped, and why)
  nlohmann::json fields;           // the same figures by name, for reports
};

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
  // The input pipeline's counters so far; nullopt for a source that has no
  // pipeline of its own (it makes each batch when the trainer asks).
  virtual std::optional<PipelineCounters> pipeline_counters() const { return std::nullopt; }
};

}  // namespace memtrain::runtime
