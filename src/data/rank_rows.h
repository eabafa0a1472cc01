// How a batch of rows is split among parts (data-parallel ranks, or
// micro-batches): near-equal, the first parts a row longer, so every part
// is the same on every rank that computes it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace memtrain::data {

// Part `part` of `parts` of a batch of `rows`: [offset, offset + length).
struct RankRows {
  std::int64_t offset = 0, length = 0;
};

inline RankRows rank_rows(std::int64_t rows, int part, int parts) {
  const std::int64_t base = rows / parts, spare = rows % parts;
  return {part * base + std::min<std::int64_t>(part, spare), base + (part < spare ? 1 : 0)};
}

}  // namespace memtrain::data
