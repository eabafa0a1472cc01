// What a Trainer's checkpoint holds: everything the next step depends on,
// as named fields of a checkpoint file (checkpoint_file.h).
//
// The field names and the version number written here never change: a
// memtrain that reads version 3 reads every version-3 file ever written. A
// field added or changed gets a new name and a new version.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace memtrain::runtime {

constexpr std::int64_t kTrainerCheckpointVersion = 3;

struct TrainerCheckpoint {
  std::int64_t steps = 0;            // batches trained
  std::int64_t optimizer_steps = 0;  // Adam's step count
  // Whose optimizer shard the moments are: rank of world; 0 and 0 for the whole state.
  std::int64_t shard_world = 0;
  std::int64_t shard_rank = 0;
  std::vector<torch::Tensor> weights, buffers;               // the model's, in its order
  std::vector<torch::Tensor> first_moments, second_moments;  // Adam's, one per weight
  torch::Tensor step_generator;                              // the trainer's dropout generator's state
  torch::Tensor default_generator;                           // LibTorch's default CPU generator's state
};

// Writes `checkpoint` beside `path` (publish_checkpoint_file puts it in place).
void write_trainer_checkpoint(const std::string& path, const TrainerCheckpoint& checkpoint);
// Throws memtrain::Error, in one line naming `path`, for a damaged file, another version, or a missing field.
TrainerCheckpoint read_trainer_checkpoint(const std::string& path);

}  // namespace memtrain::runtime
