#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace memtrain::data {

namespace {
void require(bool ok, const std::string& what) {
  if (!ok) throw UsageError("augmentation: " + what);
}
}  // namespace

void check_augment_options(const AugmentOptions& o) {
  require(o.min_area > 0 && o.min_area <= o.max_area && o.max_area <= 1,
          "crop area " + std::to_string(o.min_area) + ".." + std::to_string(o.max_area) +
              " is out of range; expected 0 < min <= max <= 1");
  require(o.min_ratio > 0 && o.min_ratio <= o.max_ratio, "crop ratio " + std::to_string(o.min_ratio) + ".." +
                                                             std::to_string(o.max_ratio) +
                                                             " is out of range; expected 0 < min <= max");
  require(o.flip_probability >= 0 && o.flip_probability <= 1,
          "flip probability " + std::to_string(o.flip_probability) + " is out of range; expected 0..1");
  require(o.stddev > 0, "standard deviation " + std::to_string(o.stddev) + " is out of range; expected > 0");
}

double uniform(SeededRandom& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

CropBox random_crop_box(std::int64_t width, std::int64_t height, const AugmentOptions& o, SeededRandom& rng) {
  const double area = static_cast<double>(width * height);
  const double log_min = std::log(o.min_ratio), log_max = std::log(o.max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (o.min_area + (o.max_area - o.min_area) * uniform(rng));
    const double ratio = std::exp(log_min + (log_max - log_min) * uniform(rng));
    const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target * ratio)));
    const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target / ratio)));
    if (w < 1 || h < 1 || w > width || h > height) continue;
    CropBox box;
    box.width = w;
    box.height = h;
    box.x = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(width - w + 1)));
    box.y = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(height - h + 1)));
    return box;
  }
  return {0, 0, width, height};
}

std::vector<float> crop_resize_normalise(const GrayImage& image, const CropBox& box, std::int64_t side, bool flip,
                                         const AugmentOptions& o) {
  if (side < 1) throw UsageError("augmentation: side " + std::to_string(side) + " px is out of range; expected >= 1");
  if (box.width < 1 || box.height < 1 || box.x < 0 || box.y < 0 || box.x + box.width > image.width ||
      box.y + box.height > image.height) {
    throw UsageError("augmentation: crop box is outside the " + std::to_string(image.width) + "x" +
                     std::to_string(image.height) + " image");
  }
  std::vector<float> out(static_cast<size_t>(side * side));
  const double sx = static_cast<double>(box.width) / static_cast<double>(side);
  const double sy = static_cast<double>(box.height) / static_cast<double>(side);
  const float scale = 1.0f / (255.0f * o.stddev), shift = o.mean / o.stddev;
  const std::uint8_t* px = image.pixels.data();
  for (std::int64_t y = 0; y < side; ++y) {
    // Pixel centres aligned, clamped to the crop: the same sampling as resize_square.
    const double fy = std::clamp((static_cast<double>(y) + 0.5) * sy - 0.5, 0.0, static_cast<double>(box.height - 1));
    const auto y0 = static_cast<std::int64_t>(fy);
    const std::int64_t y1 = std::min(y0 + 1, box.height - 1);
    const double wy = fy - static_cast<double>(y0);
    const std::uint8_t* row0 = px + (box.y + y0) * image.width + box.x;
    const std::uint8_t* row1 = px + (box.y + y1) * image.width + box.x;
    for (std::int64_t x = 0; x < side; ++x) {
      const double fx = std::clamp((static_cast<double>(x) + 0.5) * sx - 0.5, 0.0, static_cast<double>(box.width - 1));
      const auto x0 = static_cast<std::int64_t>(fx);
      const std::int64_t x1 = std::min(x0 + 1, box.width - 1);
      const double wx = fx - static_cast<double>(x0);
      const double v = (1 - wy) * ((1 - wx) * row0[x0] + wx * row0[x1]) + wy * ((1 - wx) * row1[x0] + wx * row1[x1]);
      const std::int64_t to = flip ? side - 1 - x : x;
      out[static_cast<size_t>(y * side + to)] = static_cast<float>(v) * scale - shift;
    }
  }
  return out;
}

std::vector<float> augment_image(const GrayImage& image, std::int64_t side, const AugmentOptions& o,
                                 SeededRandom& rng) {
  const CropBox box = random_crop_box(image.width, image.height, o, rng);
  const bool flip = uniform(rng) < o.flip_probability;
  return crop_resize_normalise(image, box, side, flip, o);
}

}  // namespace memtrain::data
