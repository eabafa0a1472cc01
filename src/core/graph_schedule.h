// A schedule for a training graph (core/graph.h), in Checkmate's form: stage
// t computes node t and may recompute earlier nodes first; what each stage
// keeps from the one before. core/graph_schedule_interpreter.h gives it its
// meaning.
#pragma once

#include <string>
#include <vector>

namespace memtrain {

struct GraphSchedule {
  std::vector<std::vector<char>> compute;  // [t][i]: stage t computes node i (i <= t)
  std::vector<std::vector<char>> keep;     // [t][i]: node i's output is kept entering stage t (i < t)
  std::vector<int> variant;                // [i]: which variant of node i runs, every time; empty: all 0

  int variant_of(int i) const { return variant.empty() ? 0 : variant.at(i); }
  // "t0: 0 | t1: keep 0; 1.v2 | ...": what each stage keeps and computes, and
  // which variant where it is not the node itself.
  std::string to_string() const;
};

}  // namespace memtrain
