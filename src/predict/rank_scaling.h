// PAPAYA's model across ranks: one rank's step at batch b (per rank) of a
// data-parallel job on N ranks takes
//   t_N(b) = t(b) · slowdown_N + all_reduce_N(gradient bytes, tensors) + sync_N
// t(b): the single-process fit (throughput_model.h), measured with the
//   threads each rank has, on the largest input as `profile` measures;
// slowdown_N: the compute slowdown of N ranks running at once on the
//   machine (shared cores, memory bandwidth), measured;
// all_reduce_N and sync_N: the gradient all-reduce and the step's small
//   collectives (loss, counts), fitted to measured all-reduces. Nothing of
//   the all-reduce is hidden under the backward.
// The job's throughput is N·b / t_N(b) samples per second. Every rank runs
// the same input here; with inputs that vary by step, a step also waits for
// the rank with the largest, which this model leaves out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "predict/all_reduce_model.h"
#include "predict/throughput_model.h"

namespace memtrain::predict {

struct RankMachine {
  int ranks = 1;
  double compute_slowdown = 1;  // >= 1 in practice; measured
  AllReduceModel all_reduce;
  Seconds sync_seconds = 0;  // the step's small collectives, together
};

struct RankStep {
  std::int64_t batch = 0;  // per rank
  Seconds compute = 0;     // t(b)·slowdown
  Seconds communication = 0;
  Seconds step = 0;
  double throughput = 0;  // samples per second over all ranks
};

// One rank's predicted step at `batch` per rank.
RankStep predict_rank_step(const ThroughputModel& model, const RankMachine& machine, Bytes gradient_bytes,
                           std::int64_t gradient_tensors, std::int64_t batch);

// The batch in 1..max_batch with the highest predicted throughput (the
// all-reduce does not grow with the batch, so this leans larger than one
// process's best).
RankStep best_rank_step(const ThroughputModel& model, const RankMachine& machine, Bytes gradient_bytes,
                        std::int64_t gradient_tensors, std::int64_t max_batch);

}  // namespace memtrain::predict
