// The Gloo process group a rank's collectives run on. The torch wheel
// compiles Gloo in but ships none of its headers, which c10d's
// ProcessGroupGloo.hpp includes: a build made without them (pip's, where
// none were found) leaves Gloo out, and a rank group is then refused by name.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace memtrain::runtime {

// Throws UsageError, saying what to install, where this build left Gloo out.
void require_gloo();

// One collective at a time, in the order they are issued. On `loopback`,
// over 127.0.0.1; else over MEMTRAIN_GLOO_IFNAME's interface where set, or
// the host's own address.
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                    std::chrono::milliseconds timeout, bool loopback);

}  // namespace memtrain::runtime
