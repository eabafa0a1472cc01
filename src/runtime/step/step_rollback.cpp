#include "runtime/step/step_rollback.h"

#include <utility>

namespace memtrain::runtime {

StepRollback::StepRollback(const at::Generator& generator, StagedModel* model, DeviceMemory& memory)
    : generator_(generator), rng_(RngSnapshot::capture(generator)) {
  if (model) buffers_ = BufferSnapshot::capture(*model, memory);
}

void StepRollback::discard_gradients_with(std::function<void()> discard) {
  discard_ = std::move(discard);
  params_.clear();
  grads_.clear();
}

void StepRollback::keep_gradients(const std::vector<torch::Tensor>& params) {
  discard_ = nullptr;
  params_ = params;
  grads_.clear();
  for (const torch::Tensor& p : params_) grads_.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
}

void StepRollback::restore_draws_and_buffers() const {
  if (buffers_) buffers_->restore();
  rng_.restore(generator_);
}

void StepRollback::roll_back() const {
  if (discard_) discard_();
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor p = params_[i];
    p.mutable_grad() = grads_[i].defined() ? grads_[i].clone() : torch::Tensor();
  }
  restore_draws_and_buffers();
}

}  // namespace memtrain::runtime
