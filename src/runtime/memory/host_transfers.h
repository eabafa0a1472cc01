// Copies between device and host memory that run beside compute, one copy
// engine per direction, copies in one direction one at a time in issue order:
// - on CPU, the "device" and "host" are two counted pools and each engine is
//   a thread that memcpy's between them (cpu_host_transfers.cpp);
// - on CUDA, host tensors are pinned and each engine is a side stream whose
//   copies are ordered by events (cuda_host_transfers.cpp).
// The destination is allocated when the copy is issued, so memory is charged
// where the Schedule says, whatever the copy's timing.
#pragma once

#include <memory>

#include <torch/types.h>

#include "core/units.h"

namespace memtrain::runtime {

// Destroying a HostCopy waits for its copy to end, so a step that fails
// part way leaves no copy running and no tensor held by a copy engine.
class HostCopy {
 public:
  virtual ~HostCopy() = default;
  // Blocks until the copy has ended; afterwards `destination` holds the data
  // and the source may be freed.
  virtual void wait() = 0;
  // How long the copy itself took, s; valid after wait().
  virtual Seconds seconds() const = 0;
  const torch::Tensor& destination() const { return destination_; }
  // Which engine it runs on: device to host, or host to device.
  bool to_host() const { return to_host_; }

 protected:
  torch::Tensor destination_;
  bool to_host_ = false;
};

class HostTransfers {
 public:
  virtual ~HostTransfers() = default;
  // Starts copying device tensor `t` into a new host tensor.
  virtual std::unique_ptr<HostCopy> to_host(const torch::Tensor& t) = 0;
  // Allocates a device tensor like `host` and starts copying it there.
  virtual std::unique_ptr<HostCopy> to_device(const torch::Tensor& host) = 0;
};

}  // namespace memtrain::runtime
