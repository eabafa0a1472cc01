#include "runtime/step/step_input.h"

namespace memtrain::runtime {

Batch batch_of(const torch::Tensor& x) {
  Batch batch;
  batch.input = x.detach();
  if (x.requires_grad() && x.is_floating_point()) batch.input.requires_grad_(true);
  std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (shape.empty()) shape.push_back(1);
  batch.signature = Signature::of_shape(shape);
  batch.examples = shape[0];
  return batch;
}

}  // namespace memtrain::runtime
