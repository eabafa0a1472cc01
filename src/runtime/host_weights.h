// A model's weights, gradients and Adam state kept in host memory (Harmony):
// a stage's weights are on the device only between fetch() and drop(), its
// gradients accumulate there and go back with offload_grads(), and its
// update runs on the host. The update is staged: update() computes the new
// weights and moments beside the old ones and commit() makes them current
// at the step's end, so a step that fails part way (abandon()) leaves no
// stage updated and the next attempt starts from the same weights.
#pragma once

#include <memory>
#include <vector>

#include "runtime/adam.h"
#include "runtime/device_memory.h"
#include "runtime/host_transfers.h"
#include "runtime/staged_model.h"

namespace memtrain::runtime {

class HostWeights {
 public:
  // The model's parameters and the optimizer's state must already live in
  // host memory (made under the host pool's scope). Throws UsageError for a
  // model with buffers (batch-norm statistics): they are not swapped.
  HostWeights(StagedModel& model, Adam& optimizer, DeviceMemory& memory);

  bool on_device(int stage) const { return stages_.at(stage).on_device; }
  // Copies of the stage's weights to the device; the parameters point at
  // the copies at once, so compute must wait for them.
  std::vector<std::unique_ptr<HostCopy>> fetch(int stage, HostTransfers& transfers);
  // The parameters point at the host weights again; device gradients go.
  void drop(int stage);
  // Copies of the stage's accumulated gradients to the host; hand them to
  // grads_arrived() once they have ended.
  std::vector<std::unique_ptr<HostCopy>> offload_grads(int stage, HostTransfers& transfers);
  void grads_arrived(int stage, const std::vector<std::unique_ptr<HostCopy>>& copies);
  // Copies of the host's gradient sum back to the device, which the next
  // backward accumulates into.
  std::vector<std::unique_ptr<HostCopy>> fetch_grads(int stage, HostTransfers& transfers);
  // The optimizer step for the stage, on the host, from its gradient sum.
  void update(int stage);
  // Makes every staged update current and counts the step.
  void commit();
  // Forgets this step: staged updates, gradients, device copies.
  void abandon();

 private:
  struct Weight {
    torch::Tensor param;      // the module's parameter, pointed at master or a device copy
    torch::Tensor master;     // the weights, host memory
    torch::Tensor host_grad;  // the gradient sum that reached the host; undefined before
    size_t index = 0;         // in the optimizer
    torch::Tensor next_w, next_m, next_v;  // a staged update
  };
  struct StageWeights {
    std::vector<Weight> weights;
    bool on_device = false;
    bool updated = false;
  };

  Adam& optimizer_;
  DeviceMemory& memory_;
  std::vector<StageWeights> stages_;
};

}  // namespace memtrain::runtime
