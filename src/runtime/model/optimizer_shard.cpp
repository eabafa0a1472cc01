#include "runtime/model/optimizer_shard.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace memtrain::runtime {

std::vector<ElementRange> optimizer_shard(const std::vector<std::int64_t>& numels, int rank, int world) {
  MEMTRAIN_ASSERT(world >= 1 && rank >= 0 && rank < world, "a shard's rank is one of the world's");
  const std::int64_t total = std::accumulate(numels.begin(), numels.end(), std::int64_t{0});
  // Rank r's flat range; the last ends at `total` exactly.
  const std::int64_t from = total * rank / world, to = total * (rank + 1) / world;
  std::vector<ElementRange> ranges;
  std::int64_t offset = 0;
  for (const std::int64_t n : numels) {
    const std::int64_t begin = std::clamp(from - offset, std::int64_t{0}, n);
    const std::int64_t end = std::clamp(to - offset, std::int64_t{0}, n);
    ranges.push_back({begin, std::max(begin, end)});
    offset += n;
  }
  return ranges;
}

}  // namespace memtrain::runtime
