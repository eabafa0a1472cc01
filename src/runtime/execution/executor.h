// Runs a Schedule on LibTorch, stage by stage, holding exactly the tensors
// the memory model (src/plan/MEMORY_MODEL.md) says it holds:
// - each stage's input is a detached leaf; F_all builds the stage's local
//   graph and keeps it; B calls backward on it with the incoming gradient
//   and hands the input's gradient to the previous stage;
// - F_ck/F_n run without grad and keep only the output (F_n drops the input);
// - a stage that runs forward again in the same step replays the random
//   generators from its first forward, so dropout masks are identical and a
//   checkpointed step computes exactly what a plain one does;
// - Offload/Release/Prefetch move a stored x_i to host memory and back on
//   the device's copy engines (HostTransfers); the bytes that come back are
//   the bytes that left, so an offloaded step computes exactly what a plain
//   one does too.
// - a schedule naming micro-batches splits the batch by rows and runs each
//   micro-batch with its own activations, gradient and generator;
// - with HostWeights attached, the weight operations fetch and drop a
//   stage's weights, send its gradients to the host and update it there;
// - with a GradientReducer (one rank of a data-parallel step), AllReduce
//   starts a gradient bucket's sum over the ranks beside compute, and the
//   run ends when every sum has.
// It measures every operation: bytes live before and after, peak during,
// and seconds, without waiting for the device: bytes are the allocator's
// counts, which the host keeps as it queues work, and seconds are read
// between marks in the device's queue once the run ends (one wait per run).
#pragma once

#include <memory>
#include <vector>

#include "core/copy_stats.h"
#include "core/reduce_stats.h"
#include "core/schedule.h"
#include "core/schedule_interpreter.h"
#include "runtime/execution/gradient_reducer.h"
#include "runtime/execution/host_weights.h"
#include "runtime/execution/saved_tensors.h"
#include "runtime/input/batch.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/staged_model.h"
#include "runtime/model/step_context.h"

namespace memtrain::runtime {

struct OpRecord {
  Op op;
  Bytes live_before = 0;     // device bytes live when the op started
  Bytes peak = 0;            // device peak during the op
  Bytes live_after = 0;      // device bytes live when it ended
  Bytes input_bytes = 0;     // forwards: bytes of the stage's input (a_i; the whole batch for stage 0)
  Bytes output_bytes = 0;    // forwards: bytes of the stage's output (a_{i+1})
  Seconds seconds = 0;       // wall time of the op, waits on copies included
  Seconds wait_seconds = 0;  // of which compute waited on a copy
};

struct ExecutionResult {
  double loss = 0;      // the loss stage's output
  Bytes peak = 0;       // highest device bytes over the schedule
  Seconds seconds = 0;  // wall time of the schedule
  CopyStats copies;     // what the copies moved and cost, and compute's waits on them
  ReduceStats reduce;   // the gradient sums over the ranks, and compute's waits on them
  std::vector<OpRecord> ops;
};

class LibTorchBackend;

// A schedule run an operation at a time (Executor::start), for a caller
// that runs code of its own between operations: the Python module runs the
// user's forward between its blocks' operations, and their backward as
// autograd reaches each block. Between operations the caller may take a
// stage's output and hand the backward its gradient.
class ScheduleExecution {
 public:
  ScheduleExecution(std::unique_ptr<LibTorchBackend> backend, ScheduleLimits limits, DeviceMemory& memory,
                    const Schedule& schedule);
  ~ScheduleExecution();
  ScheduleExecution(const ScheduleExecution&) = delete;
  ScheduleExecution& operator=(const ScheduleExecution&) = delete;

  bool done() const { return run_->done(); }
  const Op& next() const { return run_->next(); }
  // Runs the next operation; throws as Executor::run does (OutOfBudget when
  // an allocation exceeds an enforced budget).
  void step();
  // Runs what is left; the result as Executor::run returns it.
  ExecutionResult finish();
  // Goes on with `schedule` (ScheduleRun::continue_with): the same
  // operations so far, others from here. Neither moves saved tensors.
  void continue_with(Schedule schedule);
  // Started spillable (Executor::keep_saved_movable): moves what forwards
  // with grad keep for their backward to host memory until `wanted` device
  // bytes are free, or nothing more can move; each backward brings its
  // stage's back (Note [spilling] in executor.cpp). Returns the bytes freed.
  Bytes spill(Bytes wanted);

  // Micro-batch 0's output of stage i's last forward (x_{i+1}, or the output
  // of its forward with grad, detached); undefined when neither is held.
  torch::Tensor output_of(int stage) const;
  // The gradient flowing backward in micro-batch 0: after B(i), the
  // gradient of x_i. The caller may replace it before the next backward
  // (with the same values, or with more gradient reaching x_i).
  torch::Tensor gradient() const;
  void set_gradient(torch::Tensor gradient);
  // The operations run so far, measured: their bytes at once, their
  // seconds (and the loss) once settled.
  ExecutionResult& result();
  // Waits for the device and reads the times of the operations run so far
  // (finish() does).
  void settle();

 private:
  std::unique_ptr<LibTorchBackend> backend_;
  DeviceMemory& memory_;
  std::unique_ptr<ScheduleRun> run_;
  bool failed_ = false;  // an operation threw: the destructor drops what its backward left (failed_backward.h)
};

class Executor {
 public:
  // Installs the saved-tensor hooks (SavedTensors) before any step runs.
  Executor(StagedModel& model, DeviceMemory& memory) : model_(model), memory_(memory) { SavedTensors::install(); }

  // Runs `schedule` on `batch` through the interpreter
  // (core/schedule_interpreter.h). Gradients accumulate into the parameters'
  // .grad. Throws OutOfBudget when an allocation exceeds an enforced budget,
  // and memtrain::Error for a schedule that cannot run: the Simulator's
  // error, word for word. The device pool's peak is reset per op.
  // A schedule naming micro-batches splits the batch by rows; each
  // micro-batch's loss gradient is weighted by its share of the counted
  // targets, so gradients add up to the whole batch's.
  // With `reducer` (not owned), the schedule must sum its buckets
  // (AllReduce); without, AllReduce is refused.
  ExecutionResult run(const Schedule& schedule, const Batch& batch, StepContext& ctx,
                      GradientReducer* reducer = nullptr);

  // The same run, an operation at a time (ScheduleExecution::step), on one
  // process. `ctx` outlives the execution; `batch` is copied.
  std::unique_ptr<ScheduleExecution> start(const Schedule& schedule, const Batch& batch, StepContext& ctx);
  // Executions start()ed from now on keep what their forwards with grad save
  // movable, so that ScheduleExecution::spill can make room.
  void keep_saved_movable(bool on) { spillable_ = on; }

  // Weights in host memory: the weight operations move them through
  // `weights` (not owned; nullptr: the weights stay on the device).
  void set_host_weights(HostWeights* weights) { host_weights_ = weights; }

  // What schedules are checked against: the model's stages and their
  // variants, whether the weights live in host memory, and the gradient
  // buckets `reducer` sums (none without one).
  ScheduleLimits limits(const GradientReducer* reducer = nullptr) const;

 private:
  StagedModel& model_;
  DeviceMemory& memory_;
  std::unique_ptr<HostTransfers> transfers_;  // made at the first offload
  HostWeights* host_weights_ = nullptr;
  bool spillable_ = false;  // keep_saved_movable()
};

}  // namespace memtrain::runtime
