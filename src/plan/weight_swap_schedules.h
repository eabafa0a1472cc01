// Schedules for weights that live in host memory (Chain::weights_on_host),
// over a step split into micro-batches:
// - per_layer_swap_schedule: the vDNN-style baseline (`swap-naive`). Each
//   micro-batch runs forward and backward on its own, and every stage's
//   weights come in for its forward and again for its backward; its gradient
//   sum goes out after every backward and comes back for the next one.
// - grouped_swap_schedule: Harmony. The stages are cut into layer packs;
//   every micro-batch passes through a pack before its weights leave, the
//   last pack runs forward and backward without leaving, and each pack's
//   gradients go out once, to an update on the host right after its backward.
// Both keep each micro-batch's activations as checkpoints at the edges of
// what they swap and recompute inside; `lookahead` fetches the next weights
// while the current ones compute.
#pragma once

#include <vector>

#include "core/chain.h"
#include "core/schedule.h"

namespace memtrain::plan {

// forward_last_without_grad: the loss stage runs forward without grad too
// before its forward with grad, as every other stage does.
Schedule per_layer_swap_schedule(int stages, int micro_batches, bool lookahead, bool forward_last_without_grad = false);

// What the trainer measures a chain with when the weights live in host
// memory (schedule_for_collection's counterpart): the per-layer schedule
// without lookahead, its loss stage also run forward without grad, so every
// stage runs both forwards and its backward with one stage's weights on the
// device at a time and every cost field is measured at the least memory.
Schedule weight_swap_collection_schedule(int stages, int micro_batches);

// pack_starts: the first stage of each pack, ascending, starting at 0.
// offload_pack_inputs: every pack's input but the batch goes to host memory
// after each micro-batch's forward through the pack (released one forward
// later) and comes back one micro-batch ahead for its backward (the first
// during the next pack's last micro-batch's backward), so the device holds the
// checkpoints of two micro-batches per pack rather than all of them
// (Harmony swaps stashed activations too).
Schedule grouped_swap_schedule(int stages, int micro_batches, const std::vector<int>& pack_starts, bool lookahead,
                               bool offload_pack_inputs = false);

// `packs` contiguous packs with weights as even as a greedy cut makes them.
std::vector<int> balanced_pack_starts(const Chain& chain, int packs);

}  // namespace memtrain::plan
