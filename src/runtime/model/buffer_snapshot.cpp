#include "runtime/model/buffer_snapshot.h"

#include <torch/torch.h>

#include "runtime/memory/counting_allocator.h"

namespace memtrain::runtime {

BufferSnapshot BufferSnapshot::capture(StagedModel& model, DeviceMemory& memory) {
  BufferSnapshot s;
  const PoolScope host(&memory.host());
  for (const torch::Tensor& b : model.buffers()) {
    s.live_.push_back(b);
    s.copies_.push_back(b.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true));
  }
  return s;
}

void BufferSnapshot::restore() const {
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < live_.size(); ++k) live_[k].copy_(copies_[k]);
}

}  // namespace memtrain::runtime
