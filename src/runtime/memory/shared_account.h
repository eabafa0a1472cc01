// A budget a pool shares with other processes (several jobs on one device):
// every allocation charged to the pool is also charged here, and refused
// when the account says no, whatever the pool's own budget.
#pragma once

#include <string>

#include "core/units.h"

namespace memtrain::runtime {

class SharedAccount {
 public:
  virtual ~SharedAccount() = default;
  // False, charging nothing, when `bytes` more would pass the shared budget.
  virtual bool charge(Bytes bytes) = 0;
  virtual void refund(Bytes bytes) = 0;
  virtual std::string name() const = 0;  // for OutOfBudget: "job group NAME"
  virtual Bytes live() const = 0;        // all sharers' bytes now
  virtual Bytes budget() const = 0;      // -1: none yet
};

}  // namespace memtrain::runtime
