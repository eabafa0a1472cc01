// The state of the random generators a stage's forward may draw from, so a
// recomputation draws exactly what the first forward drew (same dropout
// masks) and leaves the stream where it was. Copies the Mersenne Twister
// state directly: no tensor is allocated, so memory accounting is untouched.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace memtrain::runtime {

class RngSnapshot {
 public:
  // Captures `generator` and LibTorch's default CPU generator, which modules
  // outside memtrain's control draw from. A CPU generator's state is copied
  // directly; another device's (CUDA: seed and Philox offset) goes through
  // get_state(), a small CPU tensor outside every counted pool.
  static RngSnapshot capture(const at::Generator& generator);
  void restore(const at::Generator& generator) const;

 private:
  struct CpuState {
    at::mt19937 engine;
    c10::optional<float> next_float;
    c10::optional<double> next_double;
  };
  static CpuState read(const at::Generator& g);
  static void write(const at::Generator& g, const CpuState& s);

  CpuState own_;           // when the generator is on the CPU
  at::Tensor device_own_;  // otherwise: its get_state()
  CpuState global_;
};

}  // namespace memtrain::runtime
