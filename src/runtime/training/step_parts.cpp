#include "runtime/training/step_parts.h"

#include <algorithm>

#include <torch/torch.h>

#include "runtime/model/classification_loss.h"
#include "runtime/model/part_seeds.h"

namespace memtrain::runtime {

namespace {

// The global count of what the loss averages over: every rank's `counted` added.
double count_across(RankSteps& ranks, const std::vector<double>& counted) {
  double all = 0;
  for (const std::vector<double>& theirs : ranks.gather(counted)) {
    for (double c : theirs) all += c;
  }
  return all;
}

// Weights in host memory with ranks: the schedule splits this rank's slice
// into micro-batches itself; they draw the seeds and carry the shares of the
// job's global micro-batches (rank r's m-th is the job's r*M+m-th), as one
// process running them all would.
void split_among_ranks(const Batch& batch, int m, RankSteps& ranks, const at::Generator& generator, StepParts& p) {
  const std::vector<std::uint64_t> seeds = draw_part_seeds(generator, ranks.world() * m);
  p.micro_seeds.assign(seeds.begin() + ranks.rank() * m, seeds.begin() + (ranks.rank() + 1) * m);
  const double mine = batch.targets.ne(kIgnoreTarget).sum().item<double>();
  p.micro_loss_denominator = std::max(1.0, count_across(ranks, {mine}));
  // A schedule of one micro-batch runs the slice whole, with the step's generator and share.
  if (m == 1) {
    p.seeds = p.micro_seeds;
    p.loss_weights = {mine / p.micro_loss_denominator};
  }
}

}  // namespace

StepParts split_step(const Batch& batch, int m, bool split, RankSteps& ranks, const at::Generator& generator) {
  StepParts p;
  if (!split) {
    p.batches = {batch};
    p.loss_weights = {1};
    if (ranks.ranked()) split_among_ranks(batch, m, ranks, generator, p);
    return p;
  }
  const int world = ranks.world();
  const int rank = ranks.rank();
  // Every global part's seed, drawn by every rank from its copy of the
  // step's generator: part g of the job draws the same masks whichever
  // process runs it.
  const std::vector<std::uint64_t> seeds = draw_part_seeds(generator, world * m);
  std::vector<double> counted;
  for (int i = 0; i < m; ++i) {
    p.batches.push_back(m > 1 ? batch_rows(batch, i, m) : batch);
    p.seeds.push_back(seeds[rank * m + i]);
    counted.push_back(p.batches.back().targets.ne(kIgnoreTarget).sum().item<double>());
  }
  const double all = count_across(ranks, counted);
  for (double c : counted) p.loss_weights.push_back(c / std::max(1.0, all));
  return p;
}

}  // namespace memtrain::runtime
