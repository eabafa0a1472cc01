// What a data-parallel step's communication costs on these ranks, measured
// with the collectives training uses: all-reduces of given sizes split in
// given numbers of tensors (as the gradients are, one per parameter), the
// small gather each step does twice, and how much slower the ranks compute
// when they all compute at once (shared cores, memory bandwidth). Every
// rank of the group calls these together.
#pragma once

#include <cstdint>
#include <vector>

#include "core/units.h"
#include "runtime/comm/rank_group.h"

namespace memtrain::runtime {

// Seconds of each of `repeats` all-reduces of `bytes` (float32) split in
// `tensors` near-equal tensors. The ranks meet before each one; a repeat's
// time is the least over the ranks (the last rank to arrive waits for
// no one, so its time is the collective's own). The same on every rank.
std::vector<Seconds> time_all_reduce(RankGroup& group, Bytes bytes, std::int64_t tensors, int repeats);

// Seconds of each of `repeats` gathers of a few numbers (as a step's loss
// and counts travel), timed as above.
std::vector<Seconds> time_small_gather(RankGroup& group, int repeats);

struct ComputeSlowdown {
  Seconds alone = 0;     // seconds per unit of work, one rank computing at a time (mean over ranks)
  Seconds together = 0;  // the same with every rank computing at once
  double slowdown() const { return alone > 0 ? together / alone : 1; }
};

// Each rank in turn multiplies matrices for about `seconds` while the others
// wait, then all do the same work at once. With this process's compute
// threads. The same on every rank.
ComputeSlowdown measure_compute_slowdown(RankGroup& group, Seconds seconds);

}  // namespace memtrain::runtime
