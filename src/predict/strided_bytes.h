// A tensor at stride s of an S x S input has ceil(S/s)^2 pixels a channel
// (padded convolutions and pooling round sides up), so an image stage's
// bytes are a staircase in S, not a smooth curve: at S = 197 a stride-32
// tensor is 7 x 7, 29% more than (197/32)^2. A quadratic through a few
// sizes misses such steps between them. Here a field's bytes at each side
// seen are kept, and fitted as the sum over the strides a stage's tensors
// lie at of c_s ceil(S/s)^2, which needs one side per stride and is exact
// at any side once the strides are right.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace memtrain::predict {

using Stride = int;              // 1, 2, 4, ..., kLargestStride; or kConstant
constexpr Stride kConstant = 0;  // bytes that do not change with the side
constexpr Stride kLargestStride = 64;

// ceil(side / s)^2, or 1 for kConstant.
double pixels(std::int64_t side, Stride s);

// The strides from `a` to `b` (either order) by factors of 2, where each is
// a power of 2; {a, kConstant} when b is kConstant (and the other way).
std::vector<Stride> strides_between(Stride a, Stride b);

class StridedBytes {
 public:
  void observe(std::int64_t side, double bytes);  // the most seen at each side is kept
  int sides() const { return static_cast<int>(at_.size()); }
  // The strides, largest first and kConstant last, whose ceil(S/s)^2 the
  // bytes seen are proportional to (within rounding): what one tensor, or
  // tensors at one stride, would give. Several where the sides seen cannot
  // tell them apart; none with fewer than 2 sides.
  std::vector<Stride> consistent_strides() const;
  // The least-squares fit over `basis` evaluated at `side`; none when fewer
  // sides were seen than `basis` has strides, or the sides seen cannot tell
  // the basis's strides apart.
  std::optional<double> fit(const std::vector<Stride>& basis, std::int64_t side) const;

 private:
  std::map<std::int64_t, double> at_;  // the most bytes seen, by side
};

}  // namespace memtrain::predict
