// Whether a model's input sizes are square images of one batch and channel
// count (N x C x S x S with N x C fixed), so that a scalar size names one
// side S. The predictor then models image stages' bytes against S, where
// strided layers round sides up: see strided_bytes.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace memtrain::predict {

class ImageSides {
 public:
  // A shape that is not N x C x S x S with the N x C of the first ends the
  // family for good: sizes then no longer name sides. So does an empty
  // shape, which stands for an input whose shape was not given.
  void observe(const std::vector<std::int64_t>& shape);
  bool holds() const { return leading_ > 0 && !broken_; }
  // The side of the largest family member whose size is at most `size`
  // (a plan cache asks for sizes between members); none when the family
  // does not hold or `size` is below a 1 x 1 image.
  std::optional<std::int64_t> side(std::int64_t size) const;
  // `size` is a member's exactly.
  bool is_member(std::int64_t size) const;

 private:
  std::int64_t leading_ = 0;  // N x C; 0 before the first shape
  bool broken_ = false;
};

}  // namespace memtrain::predict
