#include "predict/link_estimate.h"

#include <algorithm>
#include <vector>

namespace memtrain::predict {

LinkEstimate::LinkEstimate(double device_to_host, double host_to_device) {
  d2h_.rate = device_to_host;
  h2d_.rate = host_to_device;
}

void LinkEstimate::Direction::observe(Bytes bytes, Seconds seconds) {
  if (!(rate > 0) || bytes < kMinBytes || !(seconds > 0)) return;
  recent.push_back(static_cast<double>(bytes) / seconds);
  if (static_cast<int>(recent.size()) > kWindow) recent.pop_front();
  std::vector<double> sorted(recent.begin(), recent.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  rate = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  ++seen;
}

void LinkEstimate::observe(Bytes to_host_bytes, Seconds to_host_seconds, Bytes to_device_bytes,
                           Seconds to_device_seconds) {
  d2h_.observe(to_host_bytes, to_host_seconds);
  h2d_.observe(to_device_bytes, to_device_seconds);
}

}  // namespace memtrain::predict
