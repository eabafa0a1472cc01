#include "runtime/builtin_models/pooled_classifier_stage.h"

#include "runtime/model/classification_loss.h"

namespace memtrain::runtime {

PooledClassifierStage::PooledClassifierStage(std::int64_t channels, std::int64_t classes)
    : out_(register_module("out", torch::nn::Linear(channels, classes))) {}

torch::Tensor PooledClassifierStage::forward(const torch::Tensor& x, StepContext& ctx) {
  return classification_loss(out_(x.mean({2, 3})), ctx);
}

}  // namespace memtrain::runtime
