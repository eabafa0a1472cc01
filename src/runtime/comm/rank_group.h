// A data-parallel job's ranks, on c10d: a TCPStore to meet at and a Gloo
// process group for the collectives. This is the only place memtrain names
// c10d, so a LibTorch whose process-group API moves (PyTorch 2.x split
// Backend from ProcessGroup) changes this file alone.
//
// A collective that fails (a peer died, hung past the timeout, or gave up
// with an error of its own) throws RankFailure naming the rank to blame
// (peer_watch.h: heartbeats and progress on the store; a rank that fails
// says why before it exits, fail()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/error.h"
#include "core/units.h"
#include "runtime/comm/peer_watch.h"
#include "runtime/comm/tensor_buckets.h"

namespace memtrain::runtime {

// Where rank `rank` of `world` meets the others: the store at host:port.
struct RankAddress {
  std::string host = "127.0.0.1";
  int port = 29500;
  int rank = 0;
  int world = 1;
  Seconds timeout = 60;  // a collective or the meeting waits this long for a peer
  // A launcher serves the store (RendezvousHost); otherwise rank 0 does.
  bool launcher_serves_store = false;
};

// A TCP port free on loopback now (the kernel's pick, released again): where
// rank 0 of ranks started by hand on one machine can serve the store.
int free_loopback_port();

// "HOST:PORT" -> host and port; UsageError naming `flag` otherwise.
void parse_master(const std::string& text, const std::string& flag, RankAddress& address);

// The store a launcher serves for the ranks it starts, on a free port of
// `host`; it outlives any rank, so a dead rank 0 is named like any other.
class RendezvousHost {
 public:
  RendezvousHost(const std::string& host, int world, Seconds timeout);
  ~RendezvousHost();
  int port() const;
  // The failure a rank reported with RankGroup::fail(), or "".
  std::string failure_of(int rank) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class RankGroup {
 public:
  // Meets the other ranks (waits up to address.timeout for all of them).
  explicit RankGroup(const RankAddress& address);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int rank() const { return address_.rank; }
  int world() const { return address_.world; }
  Seconds timeout() const { return address_.timeout; }

  // Collectives on many tensors move them as buckets of at most
  // `bucket_bytes` (tensor_buckets.h).
  // In place, every tensor: rank `root`'s values everywhere.
  void broadcast(std::vector<torch::Tensor>& tensors, int root = 0, Bytes bucket_bytes = kBucketBytes);
  // In place, every tensor: the sum over ranks, in whatever order the
  // transport adds (ring); fast.
  void sum(std::vector<torch::Tensor>& tensors, Bytes bucket_bytes = kBucketBytes);
  // In place: ((x_0 + x_1) + x_2) + ... in rank order, so the result is
  // bit for bit what one process adding the ranks' values in turn gets.
  // Each bucket travels rank to rank and back.
  void ordered_sum(std::vector<torch::Tensor>& tensors, Bytes bucket_bytes = kBucketBytes);
  // One bucket's flat tensor, in place (gradient sums that run beside
  // compute, runtime/training/rank_gradient_sums.h): sum() of it alone.
  void sum_bucket(const torch::Tensor& flat);
  // In place, ordered_sum() of it alone. The partial sums travel in chunks
  // of `chunk` elements (every rank the same); `incoming` (ranks > 0): a
  // buffer of `flat`'s type of at least one chunk, allocated by the caller,
  // for the partial sum arriving. `tag` tells this bucket's messages from others'.
  void ordered_sum_bucket(const torch::Tensor& flat, const torch::Tensor& incoming, std::int64_t chunk, int tag);
  // Every rank's `values` (each rank the same count), in rank order.
  std::vector<std::vector<double>> gather(const std::vector<double>& values);
  // Every rank's `text` under `name` (e.g. where it serves something), in
  // rank order; through the store, so any length.
  std::vector<std::string> exchange(const std::string& name, const std::string& text);

  // Tells the others this rank gives up and why, so their failure names it.
  void fail(const std::string& why) noexcept;

 private:
  template <typename F>
  void collective(const char* what, F&& run);
  // ((x_0 + x_1) + x_2) + ... of one flat tensor, with no failure handling.
  void ordered_sum_unguarded(const torch::Tensor& flat, const torch::Tensor& incoming, std::int64_t chunk, int tag);
  template <typename Start>
  void bucketed(std::vector<torch::Tensor>& tensors, Bytes bucket_bytes, Start&& start);
  // Who is to blame for a failed collective: a reported failure, a stale
  // heartbeat or a rank behind this one.
  RankFailure diagnose(const char* what, const std::string& error);
  void start_heartbeat();
  void stop_heartbeat() noexcept;
  bool serves_store() const;
  // After a failure, a rank serving the store keeps it up (at most the
  // timeout) until every other rank has said why it failed, so none of
  // them blames the store's host for going away.
  void linger_for_the_others() noexcept;

  RankAddress address_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memtrain::runtime
