// Where everything a Schedule moves is, between two of its operations: the
// state the interpreter (core/schedule_interpreter.h) checks each operation
// against and advances. Names follow src/plan/MEMORY_MODEL.md: x_i is the
// activation a_i held on its own, x̄_i what a forward with grad of stage i
// kept, δ_g the gradient flowing backward.
#pragma once

#include <vector>

namespace memtrain {

// Where a tensor held on its own is.
enum class Residence {
  Device,  // on the device only
  ToHost,  // on the device, being copied to host memory (until its release)
  Host,    // in host memory only
};

// Where a stage's weight gradients are (weights in host memory only).
enum class GradPlace {
  None,    // no backward of the stage has run this step
  Device,  // accumulated on the device
  ToHost,  // on the device, being copied to host memory
  Host,    // summed in host memory only
};

// One micro-batch's activations and gradient.
struct MicroBatchState {
  std::vector<char> stored;           // stored[i]: x_i held on its own, i in 0..n (x_0 from the start)
  std::vector<Residence> where;       // where each stored x_i is
  std::vector<int> kept;              // kept[i]: 0, or 1 + the variant whose x̄_i is held
  std::vector<Residence> kept_where;  // where the part of x̄_i beyond its output is
  int grad = -1;                      // g of the gradient δ_g; -1 before the loss

  explicit MicroBatchState(int stages);
  bool on_device(int i) const { return stored[i] && where[i] != Residence::Host; }
  // x_i can be read: held on its own on the device, or inside x̄_{i-1}.
  bool available(int i) const { return on_device(i) || (i > 0 && kept[i - 1]); }
};

// One stage's weights and gradients when the weights live in host memory.
struct StageWeightsState {
  bool on_device = false;  // fetched and not dropped
  GradPlace grads = GradPlace::None;
  bool updated = false;  // its optimizer step has run this step
};

struct ScheduleState {
  std::vector<MicroBatchState> micro;      // one per micro-batch the schedule names
  std::vector<StageWeightsState> weights;  // one per stage; used with weights in host memory
  int reduced = 0;                         // gradient buckets whose sum over the ranks has started
};

}  // namespace memtrain
