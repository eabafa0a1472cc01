#include "runtime/input/batch.h"

#include <algorithm>

#include "core/error.h"
#include "data/rank_rows.h"

namespace memtrain::runtime {

Bytes Batch::bytes() const {
  Bytes total = 0;
  for (const torch::Tensor* t : {&input, &targets, &key_padding}) {
    if (t->defined()) total += static_cast<Bytes>(t->nbytes());
  }
  return total;
}

Batch batch_rows(const Batch& batch, int part, int parts) {
  const std::int64_t rows = batch.input.size(0);
  if (parts < 1 || part < 0 || part >= parts || rows < parts) {
    throw Error("a batch of " + std::to_string(rows) + " examples cannot give part " + std::to_string(part) + " of " +
                std::to_string(parts) + "; expected at most " + std::to_string(rows) + " parts");
  }
  const auto [offset, length] = data::rank_rows(rows, part, parts);
  Batch b;
  b.input = batch.input.narrow(0, offset, length);
  b.targets = batch.targets.narrow(0, offset, length);
  if (batch.key_padding.defined()) b.key_padding = batch.key_padding.narrow(0, offset, length);
  std::vector<std::int64_t> shape = batch.signature.shape;
  if (!shape.empty()) shape[0] = length;
  b.signature = Signature::of_shape(shape);
  b.examples = length;
  return b;
}

}  // namespace memtrain::runtime
