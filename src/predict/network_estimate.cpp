#include "predict/network_estimate.h"

#include <algorithm>

namespace memtrain::predict {

void NetworkEstimate::observe(Bytes bytes, int collectives, Seconds seconds) {
  if (collectives < 1 || !(seconds >= 0)) return;
  ++seen_;
  recent_.push_back({static_cast<double>(bytes), static_cast<double>(collectives), seconds});
  if (static_cast<int>(recent_.size()) > kWindow) recent_.pop_front();
  // Normal equations of seconds ~ latency·c + k·b, without an intercept.
  double cc = 0, cb = 0, bb = 0, cs = 0, bs = 0;
  for (const Sum& s : recent_) {
    cc += s.collectives * s.collectives;
    cb += s.collectives * s.bytes;
    bb += s.bytes * s.bytes;
    cs += s.collectives * s.seconds;
    bs += s.bytes * s.seconds;
  }
  const double det = cc * bb - cb * cb;
  double latency = 0, per_byte = 0;
  if (det > 1e-9 * cc * bb) {
    latency = (cs * bb - bs * cb) / det;
    per_byte = (bs * cc - cs * cb) / det;
  }
  // Sizes all alike (or a term that came out negative): one term alone.
  if (!(det > 1e-9 * cc * bb) || latency < 0 || per_byte < 0) {
    if (bb > 0) {
      latency = 0;
      per_byte = bs / bb;
    } else {
      latency = cs / cc;
      per_byte = 0;
    }
  }
  model_.latency = std::max(0.0, latency);
  model_.seconds_per_byte = std::max(0.0, per_byte);
}

}  // namespace memtrain::predict
