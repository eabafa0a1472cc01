#include "predict/image_sides.h"

#include <cmath>

namespace memtrain::predict {

void ImageSides::observe(const std::vector<std::int64_t>& shape) {
  if (broken_) return;
  const bool square = shape.size() == 4 && shape[2] == shape[3] && shape[0] > 0 && shape[1] > 0 && shape[2] > 0;
  if (!square) {
    broken_ = true;
    return;
  }
  const std::int64_t leading = shape[0] * shape[1];
  if (leading_ == 0) leading_ = leading;
  if (leading != leading_) broken_ = true;
}

std::optional<std::int64_t> ImageSides::side(std::int64_t size) const {
  if (!holds() || size < leading_) return std::nullopt;
  const std::int64_t area = size / leading_;
  auto s = static_cast<std::int64_t>(std::sqrt(static_cast<double>(area)));
  while (s * s > area) --s;  // the square root in doubles can be one off
  while ((s + 1) * (s + 1) <= area) ++s;
  return s;
}

bool ImageSides::is_member(std::int64_t size) const {
  const std::optional<std::int64_t> s = side(size);
  return s && *s * *s * leading_ == size;
}

}  // namespace memtrain::predict
