#include "data/image_batcher.h"

#include <algorithm>

#include "core/error.h"

namespace memtrain::data {

ImageBatcher::ImageBatcher(const ImageDataset& data, std::int64_t batch_size, std::int64_t min_scale,
                           std::int64_t max_scale, std::uint64_t seed)
    : data_(data), batch_size_(batch_size), min_scale_(min_scale), max_scale_(max_scale), seed_(seed),
      cursor_(data.count, seed) {
  if (data.count == 0) throw DataError("image batcher: the dataset has no images");
  if (batch_size < 1 || batch_size > data.count) {
    throw UsageError("batch size " + std::to_string(batch_size) + " is out of range; expected 1.." +
                     std::to_string(data.count) + " (the number of images)");
  }
  if (min_scale < 8 || max_scale < min_scale || max_scale > 1024) {
    throw UsageError("image scales " + std::to_string(min_scale) + ".." + std::to_string(max_scale) +
                     " are out of range; expected 8 <= min <= max <= 1024");
  }
}

std::int64_t ImageBatcher::batches_per_epoch() const { return (data_.count + batch_size_ - 1) / batch_size_; }

ImageBatch ImageBatcher::next() {
  const std::vector<std::int64_t> picked = cursor_.take(batch_size_);
  // One draw per batch from a stream of its own, so the scale sequence does
  // not depend on how the order was shuffled.
  SeededRandom rng(seed_ ^ (0xA5A5A5A5ull + static_cast<std::uint64_t>(drawn_++) * 0x9E3779B97F4A7C15ull));
  const std::int64_t scale =
      min_scale_ + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(max_scale_ - min_scale_ + 1)));
  return make(picked, scale);
}

ImageBatch ImageBatcher::largest() const {
  std::vector<std::int64_t> first(static_cast<size_t>(batch_size_));
  for (std::int64_t i = 0; i < batch_size_; ++i) first[i] = i;
  return make(first, max_scale_);
}

ImageBatch ImageBatcher::make(const std::vector<std::int64_t>& images, std::int64_t scale) const {
  ImageBatch b;
  b.batch = static_cast<std::int64_t>(images.size());
  b.scale = scale;
  b.rows = data_.rows;
  b.cols = data_.cols;
  const size_t per_image = static_cast<size_t>(data_.rows * data_.cols);
  b.pixels.resize(per_image * images.size());
  for (size_t k = 0; k < images.size(); ++k) {
    std::copy_n(data_.pixels.begin() + static_cast<std::ptrdiff_t>(images[k] * per_image), per_image,
                b.pixels.begin() + static_cast<std::ptrdiff_t>(k * per_image));
    b.labels.push_back(data_.labels[images[k]]);
  }
  return b;
}

}  // namespace memtrain::data
