// A Chain is the cost model of a network cut into stages run one after the
// other; the last stage computes the loss. Planners read it, the Simulator
// prices Schedules on it, the Predictor fills it for unseen input sizes.
#pragma once

#include <string>
#include <vector>

#include "core/gradient_reduction.h"
#include "core/stage.h"

namespace memtrain {

struct Chain {
  std::vector<Stage> stages;
  Bytes output_bytes = 0;  // a_n: output of the last (loss) stage
  // Transient bytes of the optimizer's update on the device; with
  // weights_on_host, of the weights that stay there (resident_bytes).
  Bytes update_temp_bytes = 0;
  // Bytes resident all step that belong to no stage (a math library's
  // workspaces on a GPU); measured by the trainer, counted in persistent_bytes().
  Bytes resident_bytes = 0;
  // The host link's copy engines, one per direction, bytes/s; 0: no host
  // memory to offload to.
  double device_to_host_bandwidth = 0;
  double host_to_device_bandwidth = 0;
  // Compute time to start one copy operation (allocate its destination and
  // hand its tensors to a copy engine), s: schedules that start hundreds of
  // copies a step pay it hundreds of times. Measured by the trainer.
  Seconds copy_issue_time = 0;
  // Weights, gradients and optimizer state live in host memory (Harmony):
  // a schedule brings a stage's weights to the device before running it and
  // sends its gradients back for an update on the host.
  bool weights_on_host = false;
  // The host's optimizer updates run on the compute thread (a CPU build,
  // where the "device" computes on the host's cores): compute waits for
  // each, instead of running beside them as on a GPU.
  bool updates_inline = false;
  // One rank of a data-parallel job: the gradient buckets its schedules sum
  // over the ranks (AllReduce) and what that costs; empty for one process.
  GradientReduction reduction;

  int size() const { return static_cast<int>(stages.size()); }
  // a_i for i in 0..n, where a_n is output_bytes.
  Bytes activation_bytes(int i) const;
  // What OffloadSaved moves: s_i of `variant` beyond the output a_{i+1}.
  Bytes saved_beyond_output(int i, int variant = 0) const;
  // Device bytes resident for the whole step: weights, gradients, optimizer
  // state (unless weights_on_host), and resident_bytes.
  Bytes persistent_bytes() const;
  // Weights, gradients and optimizer state of every stage, wherever they live.
  Bytes model_state_bytes() const;
  Seconds forward_time() const;
  Seconds backward_time() const;

  // Throws memtrain::Error naming `origin`, the stage and the field when a
  // value is negative or the chain is empty.
  void validate(const std::string& origin) const;

 private:
  void validate_reduction(const std::string& origin) const;
};

}  // namespace memtrain
