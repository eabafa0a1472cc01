// A model's buffers (batch-norm running statistics) as they were when a step
// began. A step that fails part way has already updated them for the stages
// it ran; restoring them before the retry makes the batch count once.
// The copies live in host memory, so the device budget is untouched.
#pragma once

#include <vector>

#include <torch/types.h>

#include "runtime/memory/device_memory.h"
#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

class BufferSnapshot {
 public:
  static BufferSnapshot capture(StagedModel& model, DeviceMemory& memory);
  void restore() const;
  bool empty() const { return live_.empty(); }

 private:
  std::vector<torch::Tensor> live_;    // the model's buffers themselves
  std::vector<torch::Tensor> copies_;  // their values at capture, in host memory
};

}  // namespace memtrain::runtime
