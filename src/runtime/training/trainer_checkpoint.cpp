#include "runtime/training/trainer_checkpoint.h"

#include "core/error.h"
#include "runtime/training/checkpoint_file.h"

namespace memtrain::runtime {

namespace {

// Field names: written to disk, never changed.
constexpr const char* kVersion = "version";
constexpr const char* kSteps = "steps";
constexpr const char* kOptimizerSteps = "optimizer_steps";
constexpr const char* kShardWorld = "shard_world";
constexpr const char* kShardRank = "shard_rank";
constexpr const char* kWeights = "weights";  // the count; weight_0, weight_1, ... hold them
constexpr const char* kBuffers = "buffers";  // the count; buffer_0, ...
constexpr const char* kWeight = "weight_";
constexpr const char* kBuffer = "buffer_";
constexpr const char* kFirstMoment = "adam_first_moment_";
constexpr const char* kSecondMoment = "adam_second_moment_";
constexpr const char* kStepGenerator = "step_generator";
constexpr const char* kDefaultGenerator = "default_generator";

void put_list(CheckpointFields& f, const char* prefix, const std::vector<torch::Tensor>& tensors) {
  for (std::size_t k = 0; k < tensors.size(); ++k) f.tensors[prefix + std::to_string(k)] = tensors[k];
}

}  // namespace

void write_trainer_checkpoint(const std::string& path, const TrainerCheckpoint& c) {
  CheckpointFields f;
  f.integers = {{kVersion, kTrainerCheckpointVersion},
                {kSteps, c.steps},
                {kOptimizerSteps, c.optimizer_steps},
                {kShardWorld, c.shard_world},
                {kShardRank, c.shard_rank},
                {kWeights, static_cast<std::int64_t>(c.weights.size())},
                {kBuffers, static_cast<std::int64_t>(c.buffers.size())}};
  put_list(f, kWeight, c.weights);
  put_list(f, kBuffer, c.buffers);
  put_list(f, kFirstMoment, c.first_moments);
  put_list(f, kSecondMoment, c.second_moments);
  f.tensors[kStepGenerator] = c.step_generator;
  f.tensors[kDefaultGenerator] = c.default_generator;
  write_checkpoint_file(path, f);
}

TrainerCheckpoint read_trainer_checkpoint(const std::string& path) {
  const CheckpointFields f = read_checkpoint_file(path);
  const auto fail = [&](const std::string& why) { return Error("checkpoint " + path + ": " + why); };
  const auto integer = [&](const char* name) {
    const auto it = f.integers.find(name);
    if (it == f.integers.end()) throw fail(std::string("it has no field ") + name);
    return it->second;
  };
  const auto tensor = [&](const std::string& name) {
    const auto it = f.tensors.find(name);
    if (it == f.tensors.end()) throw fail("it has no field " + name);
    return it->second;
  };
  const auto list = [&](const char* prefix, std::int64_t n) {
    std::vector<torch::Tensor> out;
    for (std::int64_t k = 0; k < n; ++k) out.push_back(tensor(prefix + std::to_string(k)));
    return out;
  };
  if (integer(kVersion) != kTrainerCheckpointVersion) {
    throw fail("version " + std::to_string(integer(kVersion)) + "; this memtrain reads version " +
               std::to_string(kTrainerCheckpointVersion));
  }
  TrainerCheckpoint c;
  c.steps = integer(kSteps);
  c.optimizer_steps = integer(kOptimizerSteps);
  c.shard_world = integer(kShardWorld);
  c.shard_rank = integer(kShardRank);
  c.weights = list(kWeight, integer(kWeights));
  c.buffers = list(kBuffer, integer(kBuffers));
  c.first_moments = list(kFirstMoment, integer(kWeights));
  c.second_moments = list(kSecondMoment, integer(kWeights));
  c.step_generator = tensor(kStepGenerator);
  c.default_generator = tensor(kDefaultGenerator);
  return c;
}

}  // namespace memtrain::runtime
