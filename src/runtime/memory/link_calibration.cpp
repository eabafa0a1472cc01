#include "runtime/memory/link_calibration.h"

#include <algorithm>
#include <vector>

#include <torch/torch.h>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

LinkRates measure_link(DeviceMemory& memory, Bytes bytes, int repeats) {
  if (bytes < 1024 || repeats < 1) {
    throw UsageError("link calibration needs copies of at least 1 KiB and at least one repeat, not " +
                     std::to_string(bytes) + " bytes x " + std::to_string(repeats));
  }
  const auto scope = memory.activate();
  std::unique_ptr<HostTransfers> transfers = memory.make_transfers();
  const torch::Tensor x = torch::ones({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(memory.device()));
  std::vector<double> out, back;
  for (int r = 0; r <= repeats; ++r) {  // r == 0 warms up allocators and pinned memory
    memory.synchronize();
    std::unique_ptr<HostCopy> to_host = transfers->to_host(x);
    to_host->wait();
    std::unique_ptr<HostCopy> to_device = transfers->to_device(to_host->destination());
    to_device->wait();
    if (r == 0) continue;
    out.push_back(to_host->seconds());
    back.push_back(to_device->seconds());
  }
  LinkRates rates;
  rates.bytes = static_cast<Bytes>(x.nbytes());
  rates.repeats = repeats;
  rates.device_to_host = static_cast<double>(rates.bytes) / std::max(1e-9, median(out));
  rates.host_to_device = static_cast<double>(rates.bytes) / std::max(1e-9, median(back));
  return rates;
}

}  // namespace memtrain::runtime
