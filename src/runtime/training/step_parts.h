// A step's batch as the executor runs it: whole, or in parts (micro-batches
// of plain gradient accumulation, and with ranks this rank's slice of the
// job's global batch). Every part's loss carries its share of the global
// count of what the loss averages over, and its dropout draws from a seed
// drawn per global part, so N ranks compute what one process running the N
// slices as N micro-batches computes.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>

#include "runtime/input/batch.h"
#include "runtime/training/rank_steps.h"

namespace memtrain::runtime {

struct StepParts {
  std::vector<Batch> batches;
  std::vector<std::uint64_t> seeds;  // each part's dropout generator; empty: the trainer's
  std::vector<double> loss_weights;  // each part's share of the step's loss
  // Weights in host memory with ranks: what the schedule's own
  // micro-batches need to be the job's (StepContext::micro_seeds).
  std::vector<std::uint64_t> micro_seeds;
  double micro_loss_denominator = 0;
};

// `batch` cut into `micro_batches` parts when `split` (the weights on the
// device with micro-batches or ranks); else whole, and with ranks and the
// weights in host memory, with what the schedule's own micro-batches need.
// Draws the parts' seeds from `generator`.
StepParts split_step(const Batch& batch, int micro_batches, bool split, RankSteps& ranks,
                     const at::Generator& generator);

}  // namespace memtrain::runtime
