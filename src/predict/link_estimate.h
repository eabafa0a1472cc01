// The host link as training steps' own copies show it. A link measured once
// (memtrain calibrate, or a probe before training) can be far from what the
// copies reach while compute runs beside them on the same cores and memory;
// the Simulator then misprices every plan that moves data. Each direction's
// estimate is the median rate of the last kWindow steps that moved at least
// kMinBytes that way (a few small copies time their start-up, not the
// link); until one has, it is the rate given at the start.
#pragma once

#include <deque>

#include "core/units.h"

namespace memtrain::predict {

class LinkEstimate {
 public:
  static constexpr int kWindow = 16;
  static constexpr Bytes kMinBytes = Bytes{1} << 20;

  // Rates in bytes/s; 0 means no link, and stays so.
  LinkEstimate(double device_to_host, double host_to_device);

  // One step's copies: bytes moved each way and the copies' own seconds.
  void observe(Bytes to_host_bytes, Seconds to_host_seconds, Bytes to_device_bytes, Seconds to_device_seconds);

  double device_to_host() const { return d2h_.rate; }
  double host_to_device() const { return h2d_.rate; }
  // Steps whose copies have set each direction's estimate so far.
  long device_to_host_steps() const { return d2h_.seen; }
  long host_to_device_steps() const { return h2d_.seen; }

 private:
  struct Direction {
    double rate = 0;
    std::deque<double> recent;
    long seen = 0;
    void observe(Bytes bytes, Seconds seconds);
  };
  Direction d2h_, h2d_;
};

}  // namespace memtrain::predict
