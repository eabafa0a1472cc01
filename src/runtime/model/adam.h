// Adam (Kingma & Ba) with decoupled weight decay, written for a fixed memory
// footprint: gradients and both moment tensors are allocated up front, so
// every step's resident bytes are the same. On the host (CPU tensors) an
// update is one fused pass that allocates nothing; elsewhere it runs op by
// op and needs one temporary the size of the largest weight tensor.
//
// Sharded (ZeRO-1), it keeps the moments of the weight elements it owns
// alone and updates only those; every element gets the same float
// operations as unsharded, so the ranks' shards together update bit for
// bit what one unsharded Adam does.
#pragma once

#include <vector>

#include <torch/types.h>

#include "core/units.h"
#include "runtime/model/optimizer_shard.h"

namespace memtrain::runtime {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class Adam {
 public:
  // Allocates .grad (zeros) and both moments for every parameter, on the
  // current thread's memory scope. `owned` (one range per parameter; empty:
  // all of every one) keeps moments and updates for those elements only.
  Adam(std::vector<torch::Tensor> params, AdamOptions options, std::vector<ElementRange> owned = {});

  void zero_grad();
  void step();

  // One update of weight `w` with its moments `m`, `v` in place, for
  // gradient `g`, as the `t`-th step: what step() does per weight, for
  // callers that keep weights elsewhere (HostWeights updates a stage at a time).
  void apply(torch::Tensor w, torch::Tensor m, torch::Tensor v, const torch::Tensor& g, long t) const;
  // The same update written to w_out, m_out, v_out, leaving w, m, v as they
  // were (outputs may be the inputs): HostWeights stages its updates so.
  void apply_into(torch::Tensor w_out, torch::Tensor m_out, torch::Tensor v_out, const torch::Tensor& w,
                  const torch::Tensor& m, const torch::Tensor& v, const torch::Tensor& g, long t) const;
  const std::vector<torch::Tensor>& params() const { return params_; }
  // The elements of parameter k this optimizer updates (all, unless sharded).
  const ElementRange& owned(size_t k) const { return owned_.at(k); }
  bool sharded() const { return sharded_; }
  // Bytes of both moments, for the owned elements.
  Bytes state_bytes() const;
  torch::Tensor& first_moment(size_t k) { return m_.at(k); }
  torch::Tensor& second_moment(size_t k) { return v_.at(k); }
  // Counts a step whose updates were applied weight by weight through apply().
  void count_step() { ++steps_; }

  static constexpr int kSlots = 2;  // optimizer tensors per weight
  // Bytes step() allocates at most: off the host one temporary the size of
  // the largest weight, plus room for the 0-d tensors LibTorch wraps scalar
  // arguments in.
  Bytes update_temp_bytes() const;
  long steps() const { return steps_; }
  void restore_steps(long steps) { steps_ = steps; }  // resuming from a checkpoint

  // Seconds one update takes per byte of weights on the host (CPU), timed
  // on scratch tensors of `bytes` (the fastest of `repeats` after one
  // untimed): how the Simulator prices an update there.
  static double measure_host_seconds_per_byte(Bytes bytes = 64 << 20, int repeats = 5);

 private:
  std::vector<torch::Tensor> params_, m_, v_;
  std::vector<ElementRange> owned_;
  bool sharded_ = false;
  AdamOptions options_;
  long steps_ = 0;
};

}  // namespace memtrain::runtime
