// ZeRO-1's split of the optimizer state over data-parallel ranks: the
// weights' elements, taken in order as one flat array, cut into `world`
// contiguous ranges of near-equal length; rank r keeps Adam's moments for
// its range alone and updates those elements, and the ranks then share the
// updated weights. Each rank's share is within one element of 1/world.
#pragma once

#include <cstdint>
#include <vector>

namespace memtrain::runtime {

// Elements [begin, end) of one weight tensor (flattened); empty when begin == end.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const ElementRange& o) const { return begin == o.begin && end == o.end; }
};

// Per weight tensor (element counts `numels`, in order): the part rank
// `rank` of `world` owns. world 1 owns everything.
std::vector<ElementRange> optimizer_shard(const std::vector<std::int64_t>& numels, int rank, int world);

}  // namespace memtrain::runtime
