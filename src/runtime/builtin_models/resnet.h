// A ResNet-style CNN for image classification that accepts any H x W: a
// stem, then basic residual blocks (one stage each) in groups whose width
// doubles and resolution halves, then global average pooling, a linear
// classifier and the loss.
#pragma once

#include <cstdint>

#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

struct ResNetConfig {
  std::int64_t in_channels = 1;
  std::int64_t classes = 10;
  std::int64_t width = 16;  // channels of the stem and first group
  std::int64_t groups = 3;  // groups of blocks; each after the first halves H x W
  std::int64_t blocks_per_group = 2;
};

StagedModel make_resnet(const ResNetConfig& config);

}  // namespace memtrain::runtime
