// Chains for tests: a small hand-checked one and seeded random ones.
#pragma once

#include <cstdint>
#include <random>

#include "core/chain.h"

namespace memtrain::testing {

// Two stages whose simulated costs tests/sim/simulator_test.cpp works out by hand.
inline Chain hand_chain() {
  Chain c;
  Stage s0;
  s0.name = "body";
  s0.input_bytes = 10;
  s0.saved_bytes = 40;
  s0.forward_temp_bytes = 5;
  s0.nograd_forward_temp_bytes = 6;
  s0.backward_temp_bytes = 7;
  s0.forward_time = 1;
  s0.backward_time = 2;
  s0.param_bytes = 100;
  Stage s1;
  s1.name = "loss";
  s1.input_bytes = 20;
  s1.saved_bytes = 24;
  s1.forward_temp_bytes = 3;
  s1.nograd_forward_temp_bytes = 2;
  s1.backward_temp_bytes = 1;
  s1.forward_time = 0.5;
  s1.backward_time = 1;
  c.stages = {s0, s1};
  c.output_bytes = 4;
  c.update_temp_bytes = 8;
  return c;
}

// A chain of `n` stages with sizes like a network's: each stage keeps more
// than its output (s_i >= a_{i+1}), temporaries are a fraction of that.
inline Chain random_chain(int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  Chain c;
  std::int64_t a = uniform(100, 1000);
  for (int i = 0; i < n; ++i) {
    Stage s;
    s.name = "s" + std::to_string(i);
    s.input_bytes = a;
    const std::int64_t next = i + 1 < n ? uniform(100, 1000) : 4;
    s.saved_bytes = next + uniform(1, 4000);
    s.forward_temp_bytes = uniform(0, 500);
    s.nograd_forward_temp_bytes = uniform(0, 800);
    s.backward_temp_bytes = uniform(0, 800);
    s.forward_time = static_cast<double>(uniform(1, 100)) / 10;
    s.backward_time = 2 * s.forward_time;
    s.param_bytes = uniform(0, 300);
    c.stages.push_back(s);
    a = next;
  }
  c.output_bytes = 4;
  c.update_temp_bytes = uniform(0, 300);
  return c;
}

// `c` with a host link of `bytes_per_second` each way.
inline Chain with_link(Chain c, double bytes_per_second) {
  c.device_to_host_bandwidth = c.host_to_device_bandwidth = bytes_per_second;
  return c;
}

// random_chain with operator variants: some stages offer one or two other
// implementations that keep less for their backward and cost more time.
inline Chain random_chain_with_variants(int n, std::uint32_t seed) {
  Chain c = random_chain(n, seed);
  std::mt19937 rng(seed * 7919u + 13u);
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int i = 0; i < n; ++i) {
    Stage& s = c.stages[i];
    const int count = static_cast<int>(uniform(0, 2));
    for (int v = 0; v < count; ++v) {
      StageVariant x;
      x.name = "v" + std::to_string(v + 1);
      const Bytes output = c.activation_bytes(i + 1);
      x.saved_bytes = output + (s.saved_bytes - output) * uniform(0, 80) / 100;
      x.forward_temp_bytes = s.forward_temp_bytes * uniform(50, 150) / 100;
      x.backward_temp_bytes = s.backward_temp_bytes * uniform(50, 150) / 100;
      x.forward_time = s.forward_time * static_cast<double>(uniform(100, 130)) / 100;
      x.backward_time = s.backward_time * static_cast<double>(uniform(100, 160)) / 100;
      s.variants.push_back(x);
    }
  }
  return c;
}

}  // namespace memtrain::testing
