#include "core/gradient_reduction.h"

#include "core/error.h"

namespace memtrain {

Seconds NetworkModel::seconds(const ReduceBucket& bucket) const {
  return latency * bucket.collectives + seconds_per_byte * static_cast<double>(bucket.bytes);
}

std::vector<int> GradientReduction::first_stages() const {
  std::vector<int> out;
  for (const ReduceBucket& b : buckets) out.push_back(b.first_stage);
  return out;
}

std::vector<int> bucket_first_stages(const std::vector<Bytes>& stage_bytes, Bytes bucket_bytes) {
  std::vector<int> firsts;
  Bytes filled = 0;
  int lowest = -1;  // the open bucket's lowest stage with gradients; -1: none open
  for (int s = static_cast<int>(stage_bytes.size()) - 1; s >= 0; --s) {
    const Bytes bytes = stage_bytes[s];
    if (bytes == 0) continue;
    if (lowest >= 0 && filled + bytes > bucket_bytes) {
      // Summed once its lowest stage's backward is done; the stages without
      // gradients between it and this one go with the bucket below.
      firsts.push_back(lowest);
      filled = 0;
    }
    filled += bytes;
    lowest = s;
  }
  if (!stage_bytes.empty()) firsts.push_back(0);
  return firsts;
}

int bucket_holding(const std::vector<int>& first_stages, int stage) {
  for (std::size_t b = 0; b < first_stages.size(); ++b) {
    if (stage >= first_stages[b]) return static_cast<int>(b);
  }
  MEMTRAIN_ASSERT(false, "the last bucket starts at stage 0");
}

}  // namespace memtrain
