// What one forward with grad of a stage saved for its backward, caught by
// autograd's saved-tensor hooks so that a Schedule can move it to host memory
// and back (OffloadSaved, ReleaseSaved, PrefetchSaved). LibTorch's C++ API
// has no way to push such hooks; its autograd engine asks itself for default
// hooks, so memtrain installs an engine that answers with these while a
// Capture is alive on the thread, and with none otherwise.
//
// Only storages that nothing but the saved tensors holds move: the stage's
// input and output, its weights and anything else still referenced elsewhere
// stay, because copying them would free nothing. Views keep their shape: a
// whole storage moves and every saved tensor on it is rebuilt on the copy.
#pragma once

#include <memory>
#include <vector>

#include <torch/types.h>

#include "core/units.h"
#include "runtime/memory/host_transfers.h"

namespace memtrain::runtime {

class SavedTensors {
 public:
  using Copies = std::vector<std::unique_ptr<HostCopy>>;
  struct Slot;  // one saved tensor

  // While alive, every tensor autograd saves on this thread goes into `saved`.
  class Capture {
   public:
    explicit Capture(SavedTensors& saved);
    ~Capture();
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;

   private:
    SavedTensors* previous_;
  };

  SavedTensors();
  ~SavedTensors();

  // Starts copying to host every storage only the saved tensors hold.
  Copies offload(HostTransfers& transfers);
  // After `copies` (offload's) have ended: keeps their host copies and drops
  // the device storages.
  void release(const Copies& copies);
  // Allocates each offloaded storage on the device again, starts copying it
  // back and points the saved tensors at it; the backward must wait for the copies.
  Copies prefetch(HostTransfers& transfers);
  // After prefetch's copies have ended: drops the host copies.
  void arrived();

  // A new place for one saved tensor (the pack hook fills it).
  std::shared_ptr<Slot> add_slot();

  bool offloading() const { return state_ == State::Offloading; }
  bool on_host() const { return state_ == State::OnHost; }
  int saved_count() const { return static_cast<int>(slots_.size()); }

  // Makes autograd ask this process's engine for the hooks above; idempotent.
  // Call it before the first backward of the process where possible (it swaps
  // LibTorch's default engine for one that differs only in that answer).
  static void install();

 private:
  enum class State { Device, Offloading, OnHost };
  struct Group;  // one storage that moves, and the saved tensors on it

  State state_ = State::Device;
  std::vector<std::shared_ptr<Slot>> slots_;
  std::vector<Group> groups_;
};

}  // namespace memtrain::runtime
