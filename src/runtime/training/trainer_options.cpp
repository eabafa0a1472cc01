#include "runtime/training/trainer_options.h"

#include "core/error.h"
#include "plan/registry.h"

namespace memtrain::runtime {

TrainingModes modes_of(const TrainerOptions& o) {
  TrainingModes m;
  m.ranks = o.ranks != nullptr;
  m.shared_device = o.lease != nullptr;
  m.weights_on_host = o.weights_on_host;
  m.shard_optimizer = o.shard_optimizer;
  m.deterministic_reduce = o.deterministic_reduce;
  m.checkpoints = o.checkpoints;
  return m;
}

void check_training_modes(const TrainingModes& m) {
  if (m.shard_optimizer && m.weights_on_host) {
    throw UsageError(
        "a sharded optimizer (--shard-optimizer) with the weights in host memory (--weights-on host) is not "
        "supported: the host updates each stage whole; shard the optimizer with the weights on the device, or keep "
        "every rank's state whole");
  }
  if (m.checkpoints && m.weights_on_host) {
    throw UsageError(
        "checkpoints (--checkpoint-dir) keep the weights on the device; the weights in host memory (--weights-on "
        "host) are not supported with them");
  }
  if (m.ranks && m.shared_device) throw UsageError("ranks cannot join a job group (--share): not supported");
  if (m.deterministic_reduce && !m.ranks)
    throw UsageError("a deterministic reduce (--deterministic-reduce) orders the ranks' sum; give ranks");
  if (m.shard_optimizer && !m.ranks)
    throw UsageError("a sharded optimizer (--shard-optimizer) splits the optimizer state over ranks; give ranks");
}

StepPlannerOptions step_planner_options(const TrainerOptions& o) {
  StepPlannerOptions s;
  s.planner = o.planner;
  s.planner_options = o.planner_options;
  s.planner_options.micro_batches = o.micro_batches;
  s.collect_steps = o.collect_steps;
  s.bucket = o.bucket;
  s.margin = o.margin;
  s.max_retries = o.max_retries;
  s.prediction_scale = o.prediction_scale;
  s.device_to_host_bandwidth = o.device_to_host_bandwidth;
  s.host_to_device_bandwidth = o.host_to_device_bandwidth;
  s.refine_link = o.refine_link;
  return s;
}

void check_trainer_options(const TrainerOptions& o) {
  const StepPlannerOptions s = step_planner_options(o);
  check_step_planner_options(s);
  if (!(o.adam.lr > 0))
    throw UsageError("learning rate (adam.lr) " + std::to_string(o.adam.lr) + " is out of range; expected > 0");
  if (o.micro_batches < 1) {
    throw UsageError("micro-batches (micro_batches) " + std::to_string(o.micro_batches) +
                     " is out of range; expected >= 1");
  }
  check_training_modes(modes_of(o));
  plan::check_weights_placement(*plan::make_planner(s.planner, s.planner_options), o.weights_on_host);
  if (o.weights_on_host && !(o.device_to_host_bandwidth > 0 && o.host_to_device_bandwidth > 0)) {
    throw UsageError(
        "weights in host memory need the host link's bandwidth to plan their copies: set "
        "device_to_host_bandwidth and host_to_device_bandwidth (bytes/s; measured by memtrain calibrate)");
  }
}

}  // namespace memtrain::runtime
