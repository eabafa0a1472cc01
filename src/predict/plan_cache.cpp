#include "predict/plan_cache.h"

#include "core/error.h"

namespace memtrain::predict {

PlanCache::PlanCache(std::int64_t bucket_width) : width_(bucket_width) {
  if (bucket_width < 1) {
    throw UsageError("plan cache: bucket width " + std::to_string(bucket_width) + " must be >= 1");
  }
}

const Plan* PlanCache::find(std::int64_t size) {
  auto it = plans_.find(bucket_of(size));
  if (it == plans_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  return &it->second;
}

void PlanCache::store(std::int64_t size, Plan plan) { plans_[bucket_of(size)] = std::move(plan); }

void PlanCache::mark_bad(std::int64_t size) {
  plans_.erase(bucket_of(size));
  ++strictness_[bucket_of(size)];
}

int PlanCache::strictness(std::int64_t size) const {
  auto it = strictness_.find(bucket_of(size));
  return it == strictness_.end() ? 0 : it->second;
}

}  // namespace memtrain::predict
