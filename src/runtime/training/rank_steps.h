// Data parallelism as the Trainer sees it: one object holds every decision
// that having ranks brings, so the trainer asks it rather than testing for
// ranks on every path. One process is a world of one: no agreement to reach,
// no sums, nothing to share.
//
// - start(): the ranks agree on what must be equal and begin from rank 0's
//   parameters and buffers.
// - The gradient sums (RankGradientSums), cut into pieces small enough for
//   every rank's budget; they run beside the backward when the budget leaves
//   room for their copies there, after it otherwise.
// - A failed attempt's sums that already completed stand; the retry leaves
//   their weights out (freeze) and they take gradients again afterwards.
// - With a sharded optimizer (ZeRO-1), each rank's elements of the weights
//   and the sharing of the updated weights after the update.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "core/gradient_reduction.h"
#include "core/schedule.h"
#include "core/units.h"
#include "runtime/comm/rank_group.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/optimizer_shard.h"
#include "runtime/model/staged_model.h"
#include "runtime/training/rank_gradient_sums.h"

namespace memtrain::runtime {

struct RankStepsOptions {
  bool deterministic_reduce = false;  // sum in rank order: bit for bit one process running the slices
  bool sum_beside_backward = true;    // sum buckets as the backward makes them final, room permitting
  bool shard_optimizer = false;       // ZeRO-1: each rank updates 1/world of the weights' elements
};

class RankSteps {
 public:
  // `ranks` (not owned): the job's ranks; null: this process alone.
  RankSteps(RankGroup* ranks, RankStepsOptions options) : ranks_(ranks), options_(options) {}

  bool ranked() const { return ranks_ != nullptr; }
  int world() const { return ranks_ ? ranks_->world() : 1; }
  int rank() const { return ranks_ ? ranks_->rank() : 0; }
  // Every rank's `mine`, in rank order.
  std::vector<std::vector<double>> gather(const std::vector<double>& mine) {
    return ranks_ ? ranks_->gather(mine) : std::vector<std::vector<double>>{mine};
  }
  // Throws Error when a rank's value differs from rank 0's (`what`: its name, for the message).
  void check_agree(double mine, const std::string& what);

  // Checks that the ranks train the same model on the same seed the same
  // way, then gives every rank rank 0's parameters and buffers.
  void start(StagedModel& model, DeviceMemory& memory, std::uint64_t seed, int micro_batches);

  // A sharded optimizer: rank r's elements of each of `model`'s weights. Empty when unsharded.
  void cut_shards(const StagedModel& model);
  const std::vector<ElementRange>& my_shard() const { return shards_.at(rank()); }
  bool sharded() const { return !shards_.empty(); }

  // The gradient sums for `model` under `budget`. `fits(reserve)`: whether
  // the planner can still plan the largest input with `reserve` bytes less.
  // per_stage: each stage's gradients leave on their own (weights on the host).
  void start_sums(StagedModel& model, Bytes budget, bool per_stage, const std::function<bool(Bytes)>& fits);
  // The sums a step's last part runs with; null without ranks.
  RankGradientSums* sums() { return sums_.get(); }
  bool sums_beside_backward() const { return sums_ && beside_backward_; }
  // What planners leave free for the sums' copies.
  Bytes planning_reserve() const { return sums_beside_backward() ? sums_->reserve_bytes() : 0; }
  // The schedule a step's last part runs: `schedule` with its sums (without ranks, `schedule`).
  Schedule summing(const Schedule& schedule) const;
  // The sums as predicted before a step (the network as the steps so far showed it).
  GradientReduction reduction() const { return sums_ ? sums_->reduction() : GradientReduction{}; }

  void begin_step() {
    if (sums_) sums_->begin_step();
  }
  // A failed attempt: weights whose gradients were already summed leave the retry.
  void freeze_summed(StagedModel& model);
  void thaw_summed();
  const std::vector<torch::Tensor>& frozen() const { return frozen_; }

  // A sharded optimizer: the temporary bytes of sharing the updated weights,
  // and the sharing itself (every rank's elements to every other rank).
  Bytes share_temporary_bytes(const StagedModel& model) const;
  void share_weights(const StagedModel& model);

 private:
  std::vector<torch::Tensor> shard_pieces(const StagedModel& model, int r) const;

  RankGroup* ranks_;
  RankStepsOptions options_;
  std::vector<std::vector<ElementRange>> shards_;  // per rank, its elements of each weight
  Bytes bucket_bytes_ = kBucketBytes;              // the pieces the ranks agreed on (sums, sharing)
  std::unique_ptr<RankGradientSums> sums_;
  bool beside_backward_ = true;        // false: no room beside the backward; the sums follow it
  std::vector<torch::Tensor> frozen_;  // weights left out of a retry
};

}  // namespace memtrain::runtime
