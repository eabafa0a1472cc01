// The network as a data-parallel job's own gradient sums show it: each
// bucket's sum took `seconds` for `bytes` in `collectives` collective
// operations; the Simulator prices AllReduce with the fit
//   seconds = latency · collectives + seconds_per_byte · bytes
// (least squares over the last kWindow sums, neither term negative). Until
// a sum is seen the network costs nothing.
#pragma once

#include <deque>

#include "core/gradient_reduction.h"

namespace memtrain::predict {

class NetworkEstimate {
 public:
  static constexpr int kWindow = 256;

  void observe(Bytes bytes, int collectives, Seconds seconds);
  NetworkModel model() const { return model_; }
  long sums_seen() const { return seen_; }

 private:
  struct Sum {
    double bytes, collectives, seconds;
  };
  std::deque<Sum> recent_;
  NetworkModel model_;
  long seen_ = 0;
};

}  // namespace memtrain::predict
