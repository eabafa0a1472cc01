// Plans keyed by the input's scalar size rounded up to a bucket. A plan is
// made for the bucket's largest size, so it is safe for every size in it; a
// hit is one hash lookup and no planning.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "core/plan.h"

namespace memtrain::predict {

class PlanCache {
 public:
  explicit PlanCache(std::int64_t bucket_width);

  std::int64_t bucket_width() const { return width_; }
  std::int64_t bucket_of(std::int64_t size) const { return (size + width_ - 1) / width_; }
  // The size a plan for this bucket is made for: the bucket's upper edge.
  std::int64_t planning_size(std::int64_t size) const { return bucket_of(size) * width_; }

  // The cached plan for `size`'s bucket, or nullptr; counts hits and misses.
  const Plan* find(std::int64_t size);
  void store(std::int64_t size, Plan plan);
  // A plan that ran out of budget: forget it and make the bucket stricter.
  void mark_bad(std::int64_t size);
  // How many times plans for this bucket have failed (0: never).
  int strictness(std::int64_t size) const;

  long hits() const { return hits_; }
  long misses() const { return misses_; }
  std::size_t size() const { return plans_.size(); }

 private:
  std::int64_t width_;
  std::unordered_map<std::int64_t, Plan> plans_;
  std::unordered_map<std::int64_t, int> strictness_;
  long hits_ = 0, misses_ = 0;
};

}  // namespace memtrain::predict
