#include "runtime/execution/failed_backward.h"

#include <torch/torch.h>

namespace memtrain::runtime {

void drop_work_of_failed_backwards() {
  const torch::AutoGradMode grad(true);
  const torch::Tensor leaf = torch::zeros({1}, torch::requires_grad());
  // Queued nodes of a graph that is gone run before any other (the engine
  // gives them the highest priority) and are dropped, not run.
  (leaf * 2).sum().backward();
}

}  // namespace memtrain::runtime
