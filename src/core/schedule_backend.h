// What gives a Schedule's operations an effect. The interpreter
// (core/schedule_interpreter.h) checks each operation and then calls the
// backend's method for its kind with the state *before* the operation, so a
// backend never checks a schedule and never decides what an operation means:
// only what it costs (the Simulator) or how it runs (the LibTorch executor).
#pragma once

#include <cstddef>

#include "core/schedule.h"
#include "core/schedule_state.h"

namespace memtrain {

class ScheduleBackend {
 public:
  virtual ~ScheduleBackend() = default;

  // Around each operation the interpreter accepted (never one it refused).
  virtual void before_op(size_t /*index*/, const Op& /*op*/) {}
  virtual void after_op(size_t /*index*/, const Op& /*op*/) {}

  // F_all(i): x_i is available; keeps x̄_i for variant op.variant.
  virtual void forward_all(const Op& op, const ScheduleState& before) = 0;
  // F_ck(i) / F_n(i): x_i is available; stores x_{i+1}. `frees_input`: F_n
  // and x_i stored on its own on the device, which the operation then lets
  // go (an x_i in host memory stays there, to be prefetched).
  virtual void forward_no_grad(const Op& op, const ScheduleState& before, bool frees_input) = 0;
  // Seeds δ_n from x̄_{n-1}.
  virtual void loss(const Op& op, const ScheduleState& before) = 0;
  // B(i): consumes x̄_i and δ_{i+1}, makes δ_i; frees x_i when it was stored
  // on its own on the device. With weights in host memory, `first_of_stage`: the stage had
  // no gradients yet this step, and this backward creates them.
  virtual void backward(const Op& op, const ScheduleState& before, bool frees_input, bool first_of_stage) = 0;
  virtual void offload(const Op& op, const ScheduleState& before) = 0;
  virtual void release(const Op& op, const ScheduleState& before) = 0;
  virtual void prefetch(const Op& op, const ScheduleState& before) = 0;
  virtual void offload_saved(const Op& op, const ScheduleState& before) = 0;
  virtual void release_saved(const Op& op, const ScheduleState& before) = 0;
  virtual void prefetch_saved(const Op& op, const ScheduleState& before) = 0;
  virtual void fetch_weights(const Op& op, const ScheduleState& before) = 0;
  // Frees the stage's device weights; `grads_leaving`: its gradients are on
  // their way to the host, and are freed once that copy has ended.
  virtual void drop_weights(const Op& op, const ScheduleState& before, bool grads_leaving) = 0;
  virtual void offload_grads(const Op& op, const ScheduleState& before) = 0;
  virtual void fetch_grads(const Op& op, const ScheduleState& before) = 0;
  virtual void update(const Op& op, const ScheduleState& before) = 0;
  // AllReduce: starts summing bucket `bucket` (its index in
  // ScheduleLimits::reduce_buckets) over the ranks.
  virtual void all_reduce(const Op& op, const ScheduleState& before, int bucket) = 0;
};

}  // namespace memtrain
