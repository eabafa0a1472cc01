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

std::optional<ModeRule> broken_mode_rule(const TrainingModes& m) {
  using M = TrainingMode;
  if (m.shard_optimizer && m.weights_on_host) {
    return ModeRule{M::ShardOptimizer, M::WeightsOnHost, false,
                    "the host updates each stage whole; shard the optimizer with the weights on the device, or keep "
                    "every rank's state whole"};
  }
  if (m.checkpoints && m.weights_on_host)
    return ModeRule{M::Checkpoints, M::WeightsOnHost, false, "checkpoints keep the weights on the device"};
  if (m.ranks && m.shared_device)
    return ModeRule{M::Ranks, M::SharedDevice, false, "a job of a group leases its budget alone"};
  if (m.deterministic_reduce && !m.ranks)
    return ModeRule{M::DeterministicReduce, M::Ranks, true, "it orders the ranks' sum"};
  if (m.shard_optimizer && !m.ranks)
    return ModeRule{M::ShardOptimizer, M::Ranks, true, "it splits the optimizer state over ranks"};
  return std::nullopt;
}

std::string mode_in_words(TrainingMode mode) {
  switch (mode) {
    case TrainingMode::Ranks: return "ranks";
    case TrainingMode::SharedDevice: return "a job group";
    case TrainingMode::WeightsOnHost: return "the weights in host memory";
    case TrainingMode::ShardOptimizer: return "a sharded optimizer";
    case TrainingMode::DeterministicReduce: return "a deterministic reduce";
    case TrainingMode::Checkpoints: return "checkpoints";
  }
  return "?";
}

std::string describe(const ModeRule& rule, const std::function<std::string(TrainingMode)>& name) {
  return name(rule.mode) +
         (rule.needs_other ? " needs " + name(rule.other) : " with " + name(rule.other) + " is not supported") + ": " +
         rule.why;
}

void check_training_modes(const TrainingModes& m) {
  if (std::optional<ModeRule> rule = broken_mode_rule(m)) throw UsageError(describe(*rule));
}

StepPlannerOptions step_planner_options(const TrainerOptions& o) {
  StepPlannerOptions s = o.steps;
  s.planner_options.micro_batches = o.micro_batches;
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
  plan::check_planner_options(s.planner_options);
  plan::check_weights_placement(s.planner, o.weights_on_host);
  if (o.weights_on_host && !(s.device_to_host_bandwidth > 0 && s.host_to_device_bandwidth > 0)) {
    throw UsageError(
        "weights in host memory need the host link's bandwidth to plan their copies: set "
        "device_to_host_bandwidth and host_to_device_bandwidth (bytes/s; measured by memtrain calibrate)");
  }
}

}  // namespace memtrain::runtime
