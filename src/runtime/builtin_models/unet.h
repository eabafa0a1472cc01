// A U-Net (Ronneberger et al.) for per-pixel classification of Fashion-MNIST
// images: each pixel of the garment is labelled with the image's class,
// background pixels with a class of their own. Its long skip connections
// (every encoder level to its decoder level, the input image to the loss)
// make it a graph, not a chain: it is planned by the graph planner.
#pragma once

#include <cstdint>

#include "runtime/model/graph_model.h"

namespace memtrain::runtime {

struct UNetSpec {
  std::int64_t levels = 2;  // poolings; images must be divisible by 2^levels
  std::int64_t width = 16;  // channels of the first level, doubling per level
  std::int64_t classes = 10;
  std::int64_t in_channels = 1;
};

// Nodes, one 3x3 convolution each: input, enc0a, enc0b, enc1a (pools), ...,
// bottoma, bottomb, dec{levels-1}a (upsamples, joins enc{levels-1}b), ...,
// dec0b, loss (reads dec0b and the input image).
// Throws UsageError for levels outside 1..6 or width below 1.
GraphModel make_unet(const UNetSpec& spec);

}  // namespace memtrain::runtime
