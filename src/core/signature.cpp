#include "core/signature.h"

#include "core/error.h"

namespace memtrain {

Signature Signature::of_shape(std::vector<std::int64_t> shape) {
  Signature s;
  s.size = 1;
  for (std::int64_t d : shape) {
    if (d <= 0) throw Error("signature: dimension " + std::to_string(d) + " is not positive");
    s.size *= d;
  }
  s.shape = std::move(shape);
  return s;
}

std::string Signature::describe() const {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += "x";
    out += std::to_string(shape[i]);
  }
  return out;
}

}  // namespace memtrain
