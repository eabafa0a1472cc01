// Data parallelism inside a Schedule: the ranks sum every stage's weight
// gradients over one another, bucket by bucket, beside compute. A bucket
// holds the gradients of a run of stages and is summed (one or a few
// collectives) as soon as the last backward of its lowest stage has run,
// so the sums of the late stages travel while the early stages' backwards
// still compute (`AllReduce` in core/schedule.h). Every rank must sum the
// same buckets in the same order, whatever its own schedule: the buckets
// are the model's, agreed by the ranks, never a planner's choice.
#pragma once

#include <vector>

#include "core/units.h"

namespace memtrain {

struct ReduceBucket {
  int first_stage = 0;  // its lowest stage; it holds this stage up to the previous bucket's first, exclusive
  Bytes bytes = 0;      // the gradients it sums
  int collectives = 1;  // the collective operations summing it takes
};

// What summing a bucket over the ranks costs on the network, fitted to
// measured sums: latency per collective plus seconds per byte.
struct NetworkModel {
  Seconds latency = 0;          // per collective, s
  double seconds_per_byte = 0;  // of a bucket's gradient bytes, s/B
  Seconds seconds(const ReduceBucket& bucket) const;
};

struct GradientReduction {
  // In the order they are summed: the highest stages first, the last one's
  // first_stage is 0. Empty: one process, nothing to sum.
  std::vector<ReduceBucket> buckets;
  // Device bytes the sums may hold at once (flat copies of the buckets in
  // flight), counted from the first AllReduce to the end of the step.
  Bytes reserve_bytes = 0;
  NetworkModel network;

  bool empty() const { return buckets.empty(); }
  std::vector<int> first_stages() const;
};

// The buckets' first stages of a model whose stage s holds
// `stage_bytes[s]` of gradients: from the last stage down, stages join a
// bucket until it would pass `bucket_bytes`; a stage larger than that is a
// bucket of its own (summed in several collectives by whoever runs it).
// Stages without gradients join the bucket below them.
std::vector<int> bucket_first_stages(const std::vector<Bytes>& stage_bytes, Bytes bucket_bytes);

// Which bucket of `first_stages` (as above, highest first) holds stage s.
int bucket_holding(const std::vector<int>& first_stages, int stage);

}  // namespace memtrain
