// ResNet-50 (He et al., with the stride on the 3x3 convolution as
// torchvision's): a 7x7 stem with max pooling, four groups of bottleneck
// blocks (1x1, 3x3, 1x1 convolutions, the last widening 4x) whose width
// doubles and resolution halves, then global average pooling and a linear
// classifier. Any H x W; one stage per block: 18 stages.
//
// Operator variants, each exact (the plain stage's bits):
// - stem: "pool-keeps-offsets": keeps the batch norm's input, the pooled
//   output and one byte per output, not the rectified tensor and 8-byte
//   indices (runtime/ops/norm_relu_max_pool.h);
// - block: "recompute-norm-relu": keeps the first two convolutions'
//   outputs, not the rectified tensors the next convolutions read, which
//   the backward rebuilds (runtime/ops/norm_relu_conv.h);
// - block: "recompute-norm-relu-conv3": keeps those two and not the last
//   convolution's output either (the widest), which a written-out backward
//   computes again from the rebuilt rectified tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

struct ResNet50Config {
  std::int64_t in_channels = 3;
  std::int64_t classes = 1000;
  std::int64_t width = 64;                                 // the stem's and first group's inner channels
  std::vector<std::int64_t> blocks_per_group{3, 4, 6, 3};  // ResNet-50's
};

StagedModel make_resnet50(const ResNet50Config& config);

}  // namespace memtrain::runtime
