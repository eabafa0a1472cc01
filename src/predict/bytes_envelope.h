// Bytes that code outside memtrain's control (the user's head and loss,
// after the planned blocks) held at the input sizes seen, predicted for
// other sizes without ever going below what a measurement implies.
//
// The model is an envelope, not a fit: such bytes grow with the input
// (logits are tokens x vocabulary) and never shrink as it grows, and a plan
// made on a fit that averages two measurements at one size runs out of
// budget in the user's code at the larger one. So:
// - at a size measured: the most seen there;
// - between two sizes measured: the straight line between them, never below
//   the smaller size's bytes (above any convex curve through them, which
//   is what tokens x vocabulary and attention-like quadratics are);
// - below every size measured: the smallest size's bytes;
// - above every size measured: the largest size's bytes in proportion to
//   the size. The size is not covered: a caller runs the least-memory
//   schedule there until a measurement covers it (covers()).
// It also keeps the least seen at each size, predicted the same way: steps
// of one loop differ (its first has no gradients yet; a loop that zeroes
// them between the forward and the backward frees them inside the loss),
// and the most of one step with the least resident bytes of another is more
// than any step held. Plans take the most; a refusal (no plan fits) only
// when even the least does not fit.
#pragma once

#include <cstdint>
#include <map>

#include "core/units.h"

namespace memtrain::predict {

class BytesEnvelope {
 public:
  enum class Bound { Most, Least };

  // `bytes` held at input `size`; a measurement that only bounds them from
  // below (a step stopped part way) is observed the same way.
  void observe(std::int64_t size, Bytes bytes);
  // `bytes` that every step at `size` holds, whichever of them: the most
  // and the least seen there rise to them (a measurement in each of the
  // precisions a loop may train in, where the loop's is not known yet).
  void observe_in_every_step(std::int64_t size, Bytes bytes);
  bool empty() const { return seen_.empty(); }
  // Whether a size at or above `size` has been measured.
  bool covers(std::int64_t size) const { return !seen_.empty() && seen_.rbegin()->first >= size; }
  // The prediction for `size` (0 with nothing measured).
  Bytes predict(std::int64_t size, Bound bound = Bound::Most) const;
  // This envelope, with `other`'s measurements at sizes above its largest
  // (a weaker source that only extends it), raised to its largest's bytes.
  BytesEnvelope extended_by(const BytesEnvelope& other) const;

 private:
  struct Seen {
    Bytes most = 0, least = 0;
  };
  std::map<std::int64_t, Seen> seen_;  // the most and the least bytes seen, by size
};

}  // namespace memtrain::predict
