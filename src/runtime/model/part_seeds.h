// The seeds of a step's parts (micro-batches, ranks' slices): each part
// draws its dropout from a generator of its own seed, so its masks are the
// same whichever process runs it and in whatever order.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>

namespace memtrain::runtime {

// `count` seeds drawn from `generator`, which advances as one draw of that many.
std::vector<std::uint64_t> draw_part_seeds(const at::Generator& generator, int count);

}  // namespace memtrain::runtime
