// The small ResNet the step tests train: width 4, one block per group, its
// weights drawn from seed 7; batch norms whose running statistics a forward
// changes in place.
#pragma once

#include "runtime/builtin_models/resnet.h"
#include "runtime/model/staged_model.h"

namespace memtrain::testing {

inline runtime::StagedModel small_resnet() {
  torch::manual_seed(7);
  runtime::ResNetConfig c;
  c.width = 4;
  c.blocks_per_group = 1;
  return runtime::make_resnet(c);
}

}  // namespace memtrain::testing
