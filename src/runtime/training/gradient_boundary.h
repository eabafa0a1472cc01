// The chain's last stage when the loss is the user's: its forward hands the
// model's output to whoever computes the loss and gets back the gradient of
// the loss with respect to it (dy); it returns a scalar whose backward
// passes dy, unchanged, to the output. The executor's Loss operation then
// starts the planned backward exactly where the user's backward left off.
#pragma once

#include <functional>

#include "runtime/model/stage_module.h"

namespace memtrain::runtime {

class GradientBoundary : public StageModule {
 public:
  // Given the output; returns dy (same shape), or throws to abandon the step.
  using Exchange = std::function<torch::Tensor(const torch::Tensor& output)>;

  void set_exchange(Exchange exchange) { exchange_ = std::move(exchange); }
  torch::Tensor forward(const torch::Tensor& output, StepContext& ctx) override;

 private:
  Exchange exchange_;
};

}  // namespace memtrain::runtime
