// The small U-Net the graph tests train: two levels, `width` channels at
// the top, its weights drawn from seed 5 in `memory`.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "runtime/builtin_models/unet.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/graph_model.h"

namespace memtrain::testing {

inline std::unique_ptr<runtime::GraphModel> small_unet(runtime::DeviceMemory& memory, int width) {
  auto scope = memory.activate();
  torch::manual_seed(5);
  runtime::UNetSpec spec;
  spec.levels = 2;
  spec.width = width;
  return std::make_unique<runtime::GraphModel>(runtime::make_unet(spec));
}

}  // namespace memtrain::testing
