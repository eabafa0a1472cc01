// The compute time a schedule spends starting each copy between device and
// host memory (Chain::copy_issue_time), as training steps show it: the
// median over the copies started in the last kWindow steps that started any.
// Per-stage, per-micro-batch weight swapping starts hundreds a step, so what
// is small per copy is not small per step.
#pragma once

#include <deque>
#include <vector>

#include "core/units.h"

namespace memtrain::predict {

class CopyIssueEstimate {
 public:
  static constexpr int kWindow = 16;

  // One step's copies: the compute seconds each took to start, waits on
  // other copies excluded. A step that started none changes nothing.
  void observe(const std::vector<Seconds>& issue_seconds);

  // 0 until a step has started a copy.
  Seconds seconds() const { return seconds_; }

 private:
  std::deque<std::vector<Seconds>> recent_;
  Seconds seconds_ = 0;
};

}  // namespace memtrain::predict
