// An image classifier's last stage: global average pooling, a linear layer
// and the loss.
#pragma once

#include <cstdint>

#include <torch/nn/modules/linear.h>

#include "runtime/model/stage_module.h"

namespace memtrain::runtime {

class PooledClassifierStage : public StageModule {
 public:
  PooledClassifierStage(std::int64_t channels, std::int64_t classes);
  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override;

 private:
  torch::nn::Linear out_;
};

}  // namespace memtrain::runtime
