// What every stage of one step can see besides its input activation: the
// batch's targets and padding mask, the step's random generator, and where
// the loss stage reports accuracy.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/types.h>

namespace memtrain::runtime {

struct StepContext {
  torch::Tensor targets;      // class per example or per token; kIgnoreTarget = ignore
  torch::Tensor key_padding;  // [batch, tokens] bool, true at padding; undefined for images
  at::Generator generator;    // dropout draws from it; the executor replays it on recompute
  bool training = true;
  // False while a stage runs again within a step (the executor clears it) or
  // while the trainer calibrates: stages then leave their buffers alone
  // (batch-norm running statistics), so recomputation changes nothing.
  bool update_buffers = true;
  // Which implementation a stage runs (StageModule::variant_names): set by
  // the executor for a forward with grad, 0 otherwise.
  int variant = 0;
  // The share of the step's loss this run carries: its counted targets over
  // the whole step's (a micro-batch's, or a rank's part of the ranks' batch),
  // so the parts' gradients add up to the whole step's. 1: the whole step.
  double loss_weight = 1;
  // A schedule that names micro-batches splits the batch itself; a step
  // that is one rank's part of the ranks' batch tells it what the ranks
  // share: the global count the loss averages over (0: this batch's own),
  // and each micro-batch's dropout seed (empty: drawn from `generator`).
  double micro_loss_denominator = 0;
  std::vector<std::uint64_t> micro_seeds;
  // Where a stage's backward puts its leaves' gradients: unset, onto their
  // .grad, as loss.backward() does; set, handed here instead, for a front
  // end that gives them to its caller's autograd (torch.autograd.grad
  // returns them). The leaves are the stage's gradient_leaves() and any
  // other its graph reached (a parameter its parent owns).
  struct TakenGradients {
    std::vector<torch::Tensor> leaves;
    std::vector<torch::Tensor> gradients;  // leaves' order; undefined where none arrived
    // The input's gradient in its uses' pieces, in the order made, where
    // input_gradient_in_pieces asked for them (the input's gradient is then
    // undefined), and how many edges of the stage's graph use the input.
    std::vector<torch::Tensor> input_pieces;
    int input_uses = 0;
  };
  std::function<void(int stage, TakenGradients taken)> take_gradients;
  // With take_gradients: the gradients of a stage's extra_outputs() (in
  // their order; undefined where none arrived).
  std::function<std::vector<torch::Tensor>(int stage)> extra_output_gradients;
  // With take_gradients: whether a stage's input gradient goes in pieces
  // (InputGradientPieces: the caller's graph adds to it too).
  std::function<bool(int stage)> input_gradient_in_pieces;

  // Written by the loss stage, through count(): examples or tokens
  // predicted right, and counted. A device's counts are read when the
  // step's work has ended (settle_counts(), which the executor calls):
  // reading them at once would wait for the device. The CPU's are at once.
  double correct = 0;
  double counted = 0;
  torch::Tensor correct_pending, counted_pending;
  void count(const torch::Tensor& correct_now, const torch::Tensor& counted_now) {
    if (correct_now.is_cpu()) {
      correct = correct_now.item<double>();
      counted = counted_now.item<double>();
    } else {
      correct_pending = correct_now;
      counted_pending = counted_now;
    }
  }
  void settle_counts() {
    if (correct_pending.defined()) correct = correct_pending.item<double>();
    if (counted_pending.defined()) counted = counted_pending.item<double>();
    correct_pending = counted_pending = torch::Tensor();
  }
};

}  // namespace memtrain::runtime
