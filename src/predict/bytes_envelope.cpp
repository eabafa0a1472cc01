#include "predict/bytes_envelope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memtrain::predict {

void BytesEnvelope::observe(std::int64_t size, Bytes bytes) {
  MEMTRAIN_ASSERT(size > 0, "an input size is positive");
  bytes = std::max<Bytes>(0, bytes);
  const auto [it, first] = seen_.try_emplace(size, Seen{bytes, bytes});
  if (!first) it->second = {std::max(it->second.most, bytes), std::min(it->second.least, bytes)};
}

void BytesEnvelope::observe_in_every_step(std::int64_t size, Bytes bytes) {
  MEMTRAIN_ASSERT(size > 0, "an input size is positive");
  bytes = std::max<Bytes>(0, bytes);
  Seen& seen = seen_.try_emplace(size, Seen{bytes, bytes}).first->second;
  seen = {std::max(seen.most, bytes), std::max(seen.least, bytes)};
}

Bytes BytesEnvelope::predict(std::int64_t size, Bound bound) const {
  if (seen_.empty()) return 0;
  const auto at = [bound](const Seen& s) { return bound == Bound::Most ? s.most : s.least; };
  const auto above = seen_.lower_bound(size);
  if (above == seen_.begin()) return at(above->second);  // at or below the smallest size
  if (above == seen_.end()) {
    const auto& [largest, seen] = *seen_.rbegin();
    return static_cast<Bytes>(std::ceil(static_cast<double>(at(seen)) * static_cast<double>(size) / largest));
  }
  if (above->first == size) return at(above->second);
  const auto below = std::prev(above);
  const Bytes low = at(below->second), high = at(above->second);
  const double t = static_cast<double>(size - below->first) / static_cast<double>(above->first - below->first);
  return std::max(low, static_cast<Bytes>(std::ceil(low + t * static_cast<double>(high - low))));
}

BytesEnvelope BytesEnvelope::extended_by(const BytesEnvelope& other) const {
  BytesEnvelope out = *this;
  const std::int64_t largest = seen_.empty() ? 0 : seen_.rbegin()->first;
  const Seen floor = seen_.empty() ? Seen{} : seen_.rbegin()->second;
  for (auto it = other.seen_.upper_bound(largest); it != other.seen_.end(); ++it) {
    // Never below what the largest size measured here held: the bytes do
    // not shrink as the input grows, whatever the weaker source says.
    out.seen_.emplace(it->first, Seen{std::max(it->second.most, floor.most), std::max(it->second.least, floor.least)});
  }
  return out;
}

}  // namespace memtrain::predict
