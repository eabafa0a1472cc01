// What a batch looks like to the planners: its shape, and one scalar that
// memory and time are modelled against (batch x tokens, batch x H x W).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memtrain {

struct Signature {
  std::vector<std::int64_t> shape;  // e.g. {32, 57} or {64, 1, 96, 96}
  std::int64_t size = 0;            // the scalar the predictor models against

  // size = the product of all dimensions; each must be positive.
  static Signature of_shape(std::vector<std::int64_t> shape);
  std::string describe() const;  // "32x57"
};

}  // namespace memtrain
