#include "runtime/model/rng_snapshot.h"

#include <mutex>

namespace memtrain::runtime {

RngSnapshot::CpuState RngSnapshot::read(const at::Generator& handle) {
  at::Generator g = handle;  // a second handle to the same generator; mutex() is non-const
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = at::check_generator<at::CPUGeneratorImpl>(g);
  return {impl->engine(), impl->next_float_normal_sample(), impl->next_double_normal_sample()};
}

void RngSnapshot::write(const at::Generator& handle, const CpuState& s) {
  at::Generator g = handle;
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = at::check_generator<at::CPUGeneratorImpl>(g);
  impl->set_engine(s.engine);
  impl->set_next_float_normal_sample(s.next_float);
  impl->set_next_double_normal_sample(s.next_double);
}

RngSnapshot RngSnapshot::capture(const at::Generator& generator) {
  RngSnapshot s;
  if (generator.device().is_cpu()) {
    s.own_ = read(generator);
  } else {
    at::Generator g = generator;
    std::lock_guard<std::mutex> lock(g.mutex());
    s.device_own_ = g.get_state();
  }
  s.global_ = read(at::detail::getDefaultCPUGenerator());
  return s;
}

void RngSnapshot::restore(const at::Generator& generator) const {
  if (device_own_.defined()) {
    at::Generator g = generator;
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(device_own_);
  } else {
    write(generator, own_);
  }
  write(at::detail::getDefaultCPUGenerator(), global_);
}

}  // namespace memtrain::runtime
