// One training batch, on the device, as the executor runs it.
#pragma once

#include <torch/types.h>

#include "core/signature.h"
#include "core/units.h"

namespace memtrain::runtime {

struct Batch {
  torch::Tensor input;        // the first stage's input: token ids or images
  torch::Tensor targets;      // see StepContext::targets
  torch::Tensor key_padding;  // see StepContext::key_padding
  Signature signature;        // shape and scalar size of `input`
  std::int64_t examples = 0;  // sentences or images

  // All the batch's tensors: a_0 in the memory model.
  Bytes bytes() const;
};

// Part `part` of `parts` of `batch`, split by rows as evenly as they go, the
// first parts one row longer (views of batch's tensors). The rows a
// micro-batch runs, and a rank's slice of the ranks' global batch.
Batch batch_rows(const Batch& batch, int part, int parts);

}  // namespace memtrain::runtime
