// What a step, or a measurement, puts back when it rolls back: the random
// generators and the model's buffers as it found them, and the parameters'
// gradients. Every front end's step (its StepGuard) and every calibration
// rolls back through one of these.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <vector>

#include "runtime/memory/device_memory.h"
#include "runtime/model/buffer_snapshot.h"
#include "runtime/model/rng_snapshot.h"
#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

class StepRollback {
 public:
  // Captures `generator` (with LibTorch's default CPU generator) and
  // `model`'s buffers (when given). The gradients are left as they are
  // until one of the two calls below says how they go back.
  StepRollback(const at::Generator& generator, StagedModel* model, DeviceMemory& memory);

  // The gradients go back by `discard` (a trainer whose steps begin with
  // none, or zeroed ones).
  void discard_gradients_with(std::function<void()> discard);
  // The gradients of `params` go back to what they are now (a caller's loop
  // that accumulates into them): none where they have none, a copy of
  // those they have (autograd adds to a gradient in place), taken here.
  void keep_gradients(const std::vector<torch::Tensor>& params);

  // The random generators and the buffers as captured (a measurement's
  // round, which leaves its gradients for the next round to add to).
  void restore_draws_and_buffers() const;
  // Those, and the gradients.
  void roll_back() const;

 private:
  at::Generator generator_;
  RngSnapshot rng_;
  std::optional<BufferSnapshot> buffers_;
  std::function<void()> discard_;
  std::vector<torch::Tensor> params_, grads_;
};

}  // namespace memtrain::runtime
