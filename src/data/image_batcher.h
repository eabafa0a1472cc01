// Batches of images in a seeded random order, each batch to be resized to
// its own random square scale: the image size, and so the memory a step
// needs, changes from one step to the next.
#pragma once

#include <cstdint>
#include <vector>

#include "data/fashion_mnist.h"
#include "data/seeded_order.h"

namespace memtrain::data {

struct ImageBatch {
  std::int64_t batch = 0;            // images
  std::int64_t scale = 0;            // side to resize to, pixels
  std::int64_t rows = 0, cols = 0;   // stored side, pixels
  std::vector<std::uint8_t> pixels;  // batch x rows x cols, as stored
  std::vector<std::int64_t> labels;  // batch
};

class ImageBatcher {
 public:
  // Scales are drawn uniformly from [min_scale, max_scale].
  ImageBatcher(const ImageDataset& data, std::int64_t batch_size, std::int64_t min_scale, std::int64_t max_scale,
               std::uint64_t seed);

  ImageBatch next();
  ImageBatch largest() const;  // batch_size images at max_scale

  std::int64_t epoch() const { return cursor_.epoch(); }
  std::int64_t batches_per_epoch() const;

 private:
  ImageBatch make(const std::vector<std::int64_t>& images, std::int64_t scale) const;

  const ImageDataset& data_;
  std::int64_t batch_size_, min_scale_, max_scale_;
  std::uint64_t seed_;
  EpochCursor cursor_;
  std::int64_t drawn_ = 0;  // batches drawn so far: indexes the scale stream
};

}  // namespace memtrain::data
