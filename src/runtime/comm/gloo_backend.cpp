#include "runtime/comm/gloo_backend.h"

#include <cstdlib>

#include "core/error.h"

#if MEMTRAIN_HAS_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace memtrain::runtime {

#if MEMTRAIN_HAS_GLOO

void require_gloo() {}

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                    std::chrono::milliseconds timeout, bool loopback) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* iface = std::getenv("MEMTRAIN_GLOO_IFNAME")) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
  } else if (loopback) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->threads = 1;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
}

#else

void require_gloo() {
  throw UsageError(
      "memtrain's own ranks run their collectives on Gloo, and this build of memtrain was made without Gloo's "
      "headers (the torch wheel ships none); install them (Debian: libgloo-dev, or scripts/install-deps.sh) and build "
      "memtrain again, or train the Python module's ranks with torch.distributed (FSDP2, DDP)");
}

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds, bool) {
  require_gloo();
  return {};
}

#endif

}  // namespace memtrain::runtime
