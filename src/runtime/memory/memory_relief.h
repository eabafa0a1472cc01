// What a pool asks before it refuses an allocation for its budget: an
// owner of tensors that can live elsewhere for a while (a step's kept
// activations, which can wait in host memory until their backward) frees
// device bytes, or the owner of a budget relative to what it measures
// raises the budget, and the allocation is tried again. Only when nothing more
// can be freed is the allocation refused (OutOfBudget). The relief runs on
// the allocating thread, inside the allocation; the pool never calls it
// again from within itself.
#pragma once

#include "core/error.h"
#include "core/units.h"

namespace memtrain::runtime {

class MemoryRelief {
 public:
  virtual ~MemoryRelief() = default;
  // Tries to make room for `bytes` more in the pool; returns the room it
  // made, freed or added to the budget (0: none).
  virtual Bytes relieve(Bytes bytes) = 0;
  // Nothing more could be freed and `why` is about to be thrown: the
  // relief may throw an error of its own instead, one that says to the
  // code that allocated what happened in its terms.
  virtual void refuse(const OutOfBudget& why) { (void)why; }
};

}  // namespace memtrain::runtime
