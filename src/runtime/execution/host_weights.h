// A model's weights, gradients and Adam state kept in host memory (Harmony):
// a stage's weights (and buffers, staged like the weights) are on the device
// only between fetch() and drop(), its
// gradients accumulate there and go back with offload_grads(), and its
// update runs on the host. The update is staged: update() computes the new
// weights and moments beside the old ones and commit() makes them current
// at the step's end, so a step that fails part way (abandon()) leaves no
// stage updated and the next attempt starts from the same weights.
// On a GPU, updates run on a host thread of their own, beside the device's
// compute and copies, as the Simulator's host timeline has them. Where the
// device's compute runs on the host's cores (the CPU build) they run inline:
// a thread of their own would take cores from compute and copies, not add any.
#pragma once

#include <future>
#include <memory>
#include <vector>

#include "runtime/memory/device_memory.h"
#include "runtime/memory/host_transfers.h"
#include "runtime/memory/serial_worker.h"
#include "runtime/model/adam.h"
#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

class HostWeights {
 public:
  // The model's parameters, buffers and the optimizer's state must already
  // live in host memory (made under the host pool's scope).
  HostWeights(StagedModel& model, Adam& optimizer, DeviceMemory& memory);
  // The caller's own optimizer updates (memtrain.Module(weights="host")):
  // the stages' parameters move into host memory here; their gradients are
  // taken from each backward (StepContext::take_gradients) and handed over
  // in host memory (gradient_to_host()), to accumulate into the
  // parameters' .grad there. No gradient operation, update or commit runs,
  // and buffers stay where they are.
  HostWeights(StagedModel& model, DeviceMemory& memory);
  // The constructor above's: the caller updates the weights.
  bool caller_updates() const { return optimizer_ == nullptr; }
  // Whether `tensor` is one of stage `stage`'s weights.
  bool holds(int stage, const torch::Tensor& tensor) const;
  // A copy of a gradient in host memory (caller_updates()).
  torch::Tensor gradient_to_host(const torch::Tensor& gradient, HostTransfers& transfers) const;
  // Every stage still on the device goes back (an execution left part way,
  // caller_updates()): the parameters point at the host weights again.
  void drop_all();

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
  // Updates on a thread of their own (default: unless the device computes on
  // the host's cores).
  void set_updates_on_own_thread(bool on) { own_thread_ = on; }
  // The default: inline, on the compute thread, where a separate thread
  // would only take cores from compute.
  static bool updates_inline_on(const DeviceMemory& memory) { return memory.computes_on_host_cores(); }
  bool updates_on_own_thread() const { return own_thread_; }
  // Starts the optimizer step for the stage on the host, from its gradient
  // sum (which must have arrived: grads_arrived()).
  void update(int stage);
  // Waits for the updates started; rethrows the first one's error.
  void wait_for_updates();
  // How long the stage's last update took on the host, s (0: none yet).
  Seconds update_seconds(int stage) const { return update_seconds_.at(stage); }
  // Makes every staged update current and counts the step.
  void commit();
  // Forgets this step: staged updates, gradients, device copies; but the
  // gradients of `keep` (weights whose sum over the ranks a failed attempt
  // already made) stay in host memory and stand for the rest of the step:
  // whatever the next attempt sends the host for them, the update uses these.
  void abandon(const std::vector<torch::Tensor>& keep = {});

 private:
  struct Weight {
    torch::Tensor param;                   // the module's parameter, pointed at master or a device copy
    torch::Tensor master;                  // the weights, host memory
    torch::Tensor host_grad;               // the gradient sum that reached the host; undefined before
    torch::Tensor kept_grad;               // abandon(keep): the gradient that stands this step, host memory
    size_t index = 0;                      // in the optimizer
    torch::Tensor next_w, next_m, next_v;  // a staged update
  };
  // A buffer (batch-norm statistics) travels with its stage's weights; the
  // forwards of a step update its device copy, which drop() brings back as
  // the step's staged value.
  struct Buffer {
    torch::Tensor tensor;  // the module's buffer, pointed at master, next or a device copy
    torch::Tensor master;  // its value before this step, host memory
    torch::Tensor next;    // its value after this step's forwards so far; undefined before
  };
  struct StageWeights {
    std::vector<Weight> weights;
    std::vector<Buffer> buffers;
    bool on_device = false;
    bool updated = false;
  };

  Adam* optimizer_;  // null: caller_updates()
  DeviceMemory& memory_;
  std::vector<StageWeights> stages_;
  std::vector<Seconds> update_seconds_;
  bool own_thread_;
  std::vector<std::future<void>> updating_;  // updates started and not waited for
  SerialWorker updater_;                     // last: its thread ends before the state it updates goes
};

}  // namespace memtrain::runtime
