// The bytes a tensor's memory holds, whatever its layout: nbytes() refuses
// sparse tensors (an embedding's gradient with sparse=True), whose memory is
// their indices and values.
#pragma once

#include <torch/types.h>

#include "core/units.h"

namespace memtrain::runtime {

inline Bytes tensor_bytes(const torch::Tensor& t) {
  if (!t.defined()) return 0;
  switch (t.layout()) {
    case torch::kSparse: return tensor_bytes(t._indices()) + tensor_bytes(t._values());
    case torch::kSparseCsr:
    case torch::kSparseBsr:
      return tensor_bytes(t.crow_indices()) + tensor_bytes(t.col_indices()) + tensor_bytes(t.values());
    case torch::kSparseCsc:
    case torch::kSparseBsc:
      return tensor_bytes(t.ccol_indices()) + tensor_bytes(t.row_indices()) + tensor_bytes(t.values());
    default: return static_cast<Bytes>(t.nbytes());
  }
}

}  // namespace memtrain::runtime
