// Training-time image augmentation, done by the prep threads: a random
// resized crop (a random part of the image, of random area and aspect ratio,
// resampled to the batch's side), a random horizontal flip, and
// normalisation to zero mean and unit deviation. The side is the batch's,
// so augmentation is what gives the planners a new input size per step.
#pragma once

#include <cstdint>
#include <vector>

#include "data/jpeg_codec.h"
#include "data/seeded_order.h"

namespace memtrain::data {

struct AugmentOptions {
  double min_area = 0.35, max_area = 1.0;           // fraction of the image a crop covers
  double min_ratio = 3.0 / 4, max_ratio = 4.0 / 3;  // crop width / height
  double flip_probability = 0.5;
  float mean = 0.2860f, stddev = 0.3530f;  // of pixels on [0, 1] (Fashion-MNIST's)
};

// UsageError naming the field for options outside their ranges.
void check_augment_options(const AugmentOptions& options);

struct CropBox {
  std::int64_t x = 0, y = 0, width = 0, height = 0;
};

// torchvision's RandomResizedCrop draw: up to ten tries at an area and a
// log-uniform ratio that fit, else the whole image.
CropBox random_crop_box(std::int64_t width, std::int64_t height, const AugmentOptions& options, SeededRandom& rng);

// The crop, resampled bilinearly to side x side, flipped when `flip`,
// normalised: side * side floats, row-major.
std::vector<float> crop_resize_normalise(const GrayImage& image, const CropBox& box, std::int64_t side, bool flip,
                                         const AugmentOptions& options);

// One draw of everything above for one sample.
std::vector<float> augment_image(const GrayImage& image, std::int64_t side, const AugmentOptions& options,
                                 SeededRandom& rng);

// A uniform draw on [0, 1).
double uniform(SeededRandom& rng);

}  // namespace memtrain::data
