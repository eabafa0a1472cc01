#include "runtime/training/rank_steps.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/error.h"
#include "plan/gradient_sums.h"
#include "runtime/comm/tensor_buckets.h"

namespace memtrain::runtime {

void RankSteps::check_agree(double mine, const std::string& what) {
  if (!ranks_) return;
  const auto all = ranks_->gather({mine});
  for (int r = 0; r < world(); ++r) {
    if (all[r][0] != all[0][0]) {
      throw Error("rank " + std::to_string(r) + "'s " + what + " is " + format_number("%.0f", all[r][0]) +
                  " but rank 0's is " + format_number("%.0f", all[0][0]) + "; every rank must agree");
    }
  }
}

void RankSteps::start(StagedModel& model, DeviceMemory& memory, std::uint64_t seed, int micro_batches) {
  if (!ranks_) return;
  // The ranks must split the same global batches the same way.
  const std::vector<double> mine{static_cast<double>(seed), static_cast<double>(micro_batches),
                                 options_.deterministic_reduce ? 1.0 : 0.0,
                                 static_cast<double>(model.parameter_count()), options_.shard_optimizer ? 1.0 : 0.0};
  const auto all = ranks_->gather(mine);
  const char* names[] = {"seed", "micro-batches", "deterministic reduce (1: on)", "parameter count",
                         "optimizer sharding (1: on)"};
  for (int r = 0; r < world(); ++r) {
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (all[r][i] != all[0][i]) {
        throw UsageError("rank " + std::to_string(r) + " has " + names[i] + " " + format_number("%.0f", all[r][i]) +
                         " but rank 0 has " + names[i] + " " + format_number("%.0f", all[0][i]) +
                         "; every rank of a job must train the same model on the same seed the same way");
      }
    }
  }
  // Parameters and buffers start as rank 0's.
  const auto scope = memory.activate();
  std::vector<torch::Tensor> state;
  for (const torch::Tensor& p : model.parameters()) state.push_back(p.detach());
  for (const torch::Tensor& b : model.buffers()) state.push_back(b);
  ranks_->broadcast(state, 0);
}

void RankSteps::cut_shards(const StagedModel& model) {
  if (!options_.shard_optimizer) return;
  std::vector<std::int64_t> numels;
  for (const torch::Tensor& p : model.parameters()) numels.push_back(p.numel());
  for (int r = 0; r < world(); ++r) shards_.push_back(optimizer_shard(numels, r, world()));
}

void RankSteps::start_sums(StagedModel& model, Bytes budget, bool per_stage, const std::function<bool(Bytes)>& fits) {
  if (!ranks_) return;
  std::vector<std::vector<torch::Tensor>> stage_weights;
  for (int i = 0; i < model.size(); ++i) stage_weights.push_back(model.stage(i).parameters());
  // Pieces as large as kBucketBytes (few round trips), halved until the
  // copies in flight take at most 1/32 of this rank's budget and leave the
  // planner room for the largest input (pieces of 0 bytes: every weight
  // summed alone, in place, no copies); the ranks then take the smallest,
  // so they cut the gradients the same way.
  constexpr Bytes kShareOfBudget = 32;
  const bool receives = rank() > 0;
  const auto reserve = [&](Bytes piece) {
    return RankGradientSums::reserve_bytes(stage_weights, piece, options_.deterministic_reduce, receives, per_stage);
  };
  const auto room_beside_backward = [&](Bytes piece) { return options_.sum_beside_backward && fits(reserve(piece)); };
  Bytes piece = kBucketBytes;
  while (piece > 0 &&
         (reserve(piece) > budget / kShareOfBudget || (options_.sum_beside_backward && !room_beside_backward(piece)))) {
    piece /= 2;
  }
  for (const std::vector<double>& theirs : ranks_->gather({static_cast<double>(piece)}))
    piece = std::min(piece, static_cast<Bytes>(theirs[0]));
  bucket_bytes_ = piece;
  // No room for even the smallest copies beside the largest input's
  // backward: this rank sums after its backward instead (the others need
  // not: every rank sums the same buckets in the same order either way).
  beside_backward_ = room_beside_backward(piece);
  sums_ = std::make_unique<RankGradientSums>(*ranks_, std::move(stage_weights), piece, options_.deterministic_reduce,
                                             per_stage);
}

Schedule RankSteps::summing(const Schedule& schedule) const {
  if (!sums_) return schedule;
  return beside_backward_ ? plan::with_gradient_sums(schedule, sums_->first_stages())
                          : plan::with_gradient_sums_at_end(schedule, sums_->first_stages());
}

void RankSteps::freeze_summed(StagedModel& model) {
  if (!sums_) return;
  torch::NoGradGuard no_grad;
  for (int s : sums_->settle_failed_attempt()) {
    for (torch::Tensor& w : model.stage(s).parameters()) {
      if (!w.requires_grad()) continue;
      w.requires_grad_(false);
      frozen_.push_back(w);
    }
  }
}

void RankSteps::thaw_summed() {
  for (torch::Tensor& w : frozen_) w.requires_grad_(true);
  frozen_.clear();
}

std::vector<torch::Tensor> RankSteps::shard_pieces(const StagedModel& model, int r) const {
  std::vector<torch::Tensor> pieces;
  const std::vector<torch::Tensor> params = model.parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    const ElementRange& owned = shards_[r][k];
    if (owned.size() > 0) pieces.push_back(params[k].detach().view({-1}).narrow(0, owned.begin, owned.size()));
  }
  return pieces;
}

Bytes RankSteps::share_temporary_bytes(const StagedModel& model) const {
  Bytes most = 0;
  for (int r = 0; r < static_cast<int>(shards_.size()); ++r)
    most = std::max(most, bucket_temporary_bytes(shard_pieces(model, r), false, bucket_bytes_));
  return most;
}

void RankSteps::share_weights(const StagedModel& model) {
  torch::NoGradGuard no_grad;
  // Rank by rank, in the same order everywhere: its updated elements, in place.
  for (int r = 0; r < static_cast<int>(shards_.size()); ++r) {
    std::vector<torch::Tensor> pieces = shard_pieces(model, r);
    ranks_->broadcast(pieces, r, bucket_bytes_);
  }
}

}  // namespace memtrain::runtime
