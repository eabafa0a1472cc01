#include "runtime/model/part_seeds.h"

#include <torch/torch.h>

namespace memtrain::runtime {

std::vector<std::uint64_t> draw_part_seeds(const at::Generator& generator, int count) {
  // One tensor draw on the generator's device, so CUDA and CPU generators advance alike.
  const torch::Tensor drawn =
      torch::empty({count}, torch::TensorOptions().dtype(torch::kLong).device(generator.device()))
          .random_(0, std::int64_t{1} << 62, generator)
          .cpu();
  std::vector<std::uint64_t> seeds;
  for (int i = 0; i < count; ++i) seeds.push_back(static_cast<std::uint64_t>(drawn[i].item<std::int64_t>()));
  return seeds;
}

}  // namespace memtrain::runtime
