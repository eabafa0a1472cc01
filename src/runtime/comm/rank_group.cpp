#include "runtime/comm/rank_group.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/parse_number.h"
#include "runtime/comm/gloo_backend.h"
#include "runtime/comm/tensor_buckets.h"

namespace memtrain::runtime {

namespace {

using std::chrono::milliseconds;

// A store that does not answer within this is gone (its host died).
constexpr milliseconds kDiagnoseTimeout{3000};

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string text_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

// The peers' board on a c10d store.
class StoreBoard : public PeerBoard {
 public:
  explicit StoreBoard(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  bool has(const std::string& key) override { return store_->check({key}); }
  std::string read(const std::string& key) override { return text_of(store_->get(key)); }
  void write(const std::string& key, const std::string& value) override { store_->set(key, bytes_of(value)); }
  void add(const std::string& key, std::int64_t amount) override { store_->add(key, amount); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

milliseconds to_ms(Seconds s) { return milliseconds(static_cast<std::int64_t>(s * 1000)); }

c10::intrusive_ptr<c10d::TCPStore> open_store(const std::string& host, int port, bool serve, int world,
                                              milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = serve;
  o.numWorkers = world;
  o.waitWorkers = false;
  o.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(host, o);
}

// A peer that dies mid-send would otherwise kill this process with SIGPIPE
// (the transport writes to its closed socket) before the failure can be
// diagnosed and named; ignored, the write fails with EPIPE and throws.
void ignore_broken_pipes() { std::signal(SIGPIPE, SIG_IGN); }

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

// The first line of a transport error: Gloo's carry a source location and
// sometimes a backtrace.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

int free_loopback_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) throw Error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int error = errno;
  ::close(s);
  if (!ok) throw Error(std::string("cannot find a free loopback port: ") + std::strerror(error));
  return ntohs(a.sin_port);
}

void parse_master(const std::string& text, const std::string& flag, RankAddress& address) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw UsageError(flag + " \"" + text + "\" is not HOST:PORT (e.g. 10.0.0.1:29500 or 127.0.0.1:29500)");
  }
  address.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  const auto value = parse_whole_integer(port);
  if (!value || *value < 1 || *value > 65535)
    throw UsageError(flag + " port \"" + port + "\" is out of range; expected 1..65535");
  address.port = static_cast<int>(*value);
}

// ---- RendezvousHost

struct RendezvousHost::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

RendezvousHost::RendezvousHost(const std::string& host, int world, Seconds timeout) : impl_(std::make_unique<Impl>()) {
  ignore_broken_pipes();
  impl_->store = open_store(host, 0, true, world, to_ms(timeout));
}

RendezvousHost::~RendezvousHost() = default;

int RendezvousHost::port() const { return impl_->store->getPort(); }

std::string RendezvousHost::failure_of(int rank) const {
  try {
    StoreBoard board(impl_->store);
    return PeerWatch::reason_of(board, rank);
  } catch (const std::exception&) {
  }
  return "";
}

// ---- RankGroup

struct RankGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::Backend> group;
  std::atomic<std::int64_t> collectives{0};
  // The heartbeat: its own thread, so a rank busy computing still beats;
  // one that is killed or stopped does not.
  std::thread beat;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  // This rank failed (diagnosed a peer or gave up): a store it serves must
  // outlive the others' diagnoses.
  bool failed = false;
  PeerWatch watch;
  explicit Impl(const RankAddress& a) : watch(a.rank, a.world) {}
};

RankGroup::RankGroup(const RankAddress& address) : address_(address), impl_(std::make_unique<Impl>(address)) {
  if (address.world < 1) throw UsageError("world size " + std::to_string(address.world) + " must be >= 1");
  if (address.rank < 0 || address.rank >= address.world) {
    throw UsageError("rank " + std::to_string(address.rank) + " is out of range for a world of " +
                     std::to_string(address.world) + "; expected 0.." + std::to_string(address.world - 1));
  }
  if (!(address.timeout > 0)) throw UsageError("timeout must be > 0 seconds");
  require_gloo();  // before meeting the others
  const std::string where = address.host + ":" + std::to_string(address.port);
  ignore_broken_pipes();
  try {
    impl_->store = open_store(address.host, address.port, !address.launcher_serves_store && address.rank == 0,
                              address.world, to_ms(address.timeout));
    StoreBoard board(impl_->store);
    impl_->watch.arrive(board);
    // Beating from here on, a rank that dies while the others wait to meet it is named like any other.
    start_heartbeat();
    impl_->group =
        make_gloo_backend(impl_->store, address.rank, address.world, to_ms(address.timeout), is_loopback(address.host));
  } catch (const UsageError&) {
    stop_heartbeat();
    throw;
  } catch (const std::exception& e) {
    const std::string met_not = "rank " + std::to_string(address.rank) + " of " + std::to_string(address.world) +
                                " could not meet the others at " + where + " within " +
                                format_number("%g", address.timeout) + " s";
    if (!impl_->store) throw Error(met_not + ": " + first_line(e.what()));
    // Who kept the others waiting: a rank that never arrived, died or gave up.
    const RankFailure why = diagnose(("meeting the others at " + where).c_str(), e.what());
    linger_for_the_others();
    stop_heartbeat();
    if (why.blamed_rank() >= 0) throw why;
    throw Error(met_not + ": " + first_line(e.what()));
  }
}

void RankGroup::start_heartbeat() {
  impl_->beat = std::thread([impl = impl_.get()] {
    StoreBoard board(impl->store);
    std::unique_lock<std::mutex> lock(impl->mutex);
    while (!impl->stopping) {
      lock.unlock();
      try {
        impl->watch.beat(board, impl->collectives.load());
      } catch (const std::exception&) {
        // The store is gone: the next collective finds out and says so.
      }
      lock.lock();
      impl->wake.wait_for(lock, PeerWatch::kBeatPeriod, [impl] { return impl->stopping; });
    }
  });
}

void RankGroup::stop_heartbeat() noexcept {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->beat.joinable()) impl_->beat.join();
}

bool RankGroup::serves_store() const { return !address_.launcher_serves_store && address_.rank == 0; }

void RankGroup::linger_for_the_others() noexcept {
  if (!impl_->failed || !serves_store() || world() == 1) return;
  try {
    // Closing the group's connections now makes the others' collectives
    // fail at once rather than after their timeout.
    impl_->group.reset();
    StoreBoard board(impl_->store);
    const auto accounted_for = [&] { return impl_->watch.others_accounted_for(board); };
    // Bounded: a rank that died as well never reports.
    const auto deadline = std::chrono::steady_clock::now() + to_ms(address_.timeout);
    while (!accounted_for() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds(50));
  } catch (const std::exception&) {
  }
}

RankGroup::~RankGroup() {
  linger_for_the_others();
  stop_heartbeat();
}

template <typename F>
void RankGroup::collective(const char* what, F&& run) {
  ++impl_->collectives;
  try {
    run();
  } catch (const RankFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw diagnose(what, e.what());
  }
}

// Runs `start` (which issues a collective on a bucket's flat copy) bucket
// by bucket, at most two in flight, and copies each back when it is done.
template <typename Start>
void RankGroup::bucketed(std::vector<torch::Tensor>& tensors, Bytes bucket_bytes, Start&& start) {
  struct InFlight {
    std::size_t bucket;
    torch::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
  };
  const std::vector<std::vector<std::size_t>> buckets = tensor_buckets(tensors, bucket_bytes);
  std::vector<InFlight> flying;
  const auto land = [&] {
    flying.front().work->wait();
    unflatten_bucket(flying.front().flat, tensors, buckets[flying.front().bucket]);
    flying.erase(flying.begin());
  };
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    if (flying.size() == 2) land();
    torch::Tensor flat = flatten_bucket(tensors, buckets[k]);
    std::vector<at::Tensor> one{flat};
    flying.push_back({k, flat, start(one)});
  }
  while (!flying.empty()) land();
}

void RankGroup::broadcast(std::vector<torch::Tensor>& tensors, int root, Bytes bucket_bytes) {
  if (world() == 1) return;
  collective("broadcast", [&] {
    bucketed(tensors, bucket_bytes, [&](std::vector<at::Tensor>& one) {
      c10d::BroadcastOptions o;
      o.rootRank = root;
      return impl_->group->broadcast(one, o);
    });
  });
}

void RankGroup::sum(std::vector<torch::Tensor>& tensors, Bytes bucket_bytes) {
  if (world() == 1) return;
  collective("all-reduce", [&] {
    bucketed(tensors, bucket_bytes, [&](std::vector<at::Tensor>& one) { return impl_->group->allreduce(one); });
  });
}

void RankGroup::ordered_sum(std::vector<torch::Tensor>& tensors, Bytes bucket_bytes) {
  if (world() == 1) return;
  collective("ordered all-reduce", [&] {
    // Bucket by bucket; element by element that is the same addition
    // whatever the buckets.
    const std::vector<std::vector<std::size_t>> buckets = tensor_buckets(tensors, bucket_bytes);
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      const torch::Tensor flat = flatten_bucket(tensors, buckets[k]);
      ordered_sum_unguarded(flat, rank() > 0 ? torch::empty_like(flat) : torch::Tensor(), flat.numel(),
                            static_cast<int>(k));
      unflatten_bucket(flat, tensors, buckets[k]);
    }
  });
}

void RankGroup::ordered_sum_unguarded(const torch::Tensor& flat, const torch::Tensor& incoming, std::int64_t chunk,
                                      int tag) {
  // Along the ranks: rank r adds its values to the sum of ranks 0..r-1, and
  // the last rank's sum goes to every rank, chunk by chunk.
  const int r = rank(), last = world() - 1;
  const std::int64_t n = flat.numel();
  chunk = std::max<std::int64_t>(1, chunk);
  MEMTRAIN_ASSERT(r == 0 || incoming.numel() >= std::min(n, chunk), "the buffer holds a chunk");
  for (std::int64_t at = 0; at < n; at += chunk) {
    const std::int64_t length = std::min(chunk, n - at);
    torch::Tensor part = flat.view({-1}).narrow(0, at, length);
    if (r > 0) {
      std::vector<at::Tensor> arriving{incoming.view({-1}).narrow(0, 0, length)};
      impl_->group->recv(arriving, r - 1, tag)->wait();
      // (sum of 0..r-1) + x_r: addition commutes exactly, so in place is fine.
      part.add_(arriving[0]);
    }
    std::vector<at::Tensor> out{part};
    if (r < last) impl_->group->send(out, r + 1, tag)->wait();
  }
  std::vector<at::Tensor> one{flat};
  c10d::BroadcastOptions o;
  o.rootRank = last;
  impl_->group->broadcast(one, o)->wait();
}

void RankGroup::sum_bucket(const torch::Tensor& flat) {
  if (world() == 1) return;
  collective("all-reduce", [&] {
    std::vector<at::Tensor> one{flat};
    impl_->group->allreduce(one)->wait();
  });
}

void RankGroup::ordered_sum_bucket(const torch::Tensor& flat, const torch::Tensor& incoming, std::int64_t chunk,
                                   int tag) {
  if (world() == 1) return;
  collective("ordered all-reduce", [&] { ordered_sum_unguarded(flat, incoming, chunk, tag); });
}

std::vector<std::vector<double>> RankGroup::gather(const std::vector<double>& values) {
  const auto count = static_cast<std::int64_t>(values.size());
  torch::Tensor mine = torch::tensor(values, torch::kDouble);
  if (world() == 1) return {values};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world(); ++r) outputs[0].push_back(torch::empty({count}, torch::kDouble));
  std::vector<at::Tensor> inputs{mine};
  collective("gather", [&] { impl_->group->allgather(outputs, inputs)->wait(); });
  std::vector<std::vector<double>> all;
  for (const at::Tensor& t : outputs[0]) {
    const double* p = t.data_ptr<double>();
    all.emplace_back(p, p + count);
  }
  return all;
}

std::vector<std::string> RankGroup::exchange(const std::string& name, const std::string& text) {
  if (world() == 1) return {text};
  const auto key = [&](int r) { return "memtrain/exchange/" + name + "/" + std::to_string(r); };
  std::vector<std::string> all(world());
  collective("exchange", [&] {
    impl_->store->set(key(rank()), bytes_of(text));
    for (int r = 0; r < world(); ++r) {
      impl_->store->wait({key(r)}, to_ms(address_.timeout));
      all[r] = text_of(impl_->store->get(key(r)));
    }
  });
  return all;
}

void RankGroup::fail(const std::string& why) noexcept {
  impl_->failed = true;
  try {
    StoreBoard board(impl_->store);
    impl_->watch.give_up(board, why);
  } catch (...) {
  }
}

namespace {

// The store did not answer the diagnosis: whoever serves it is at fault.
RankFailure store_silent(const std::string& failed, const RankAddress& address, const std::string& transport) {
  const std::string store_at = address.host + ":" + std::to_string(address.port);
  if (!address.launcher_serves_store) {
    return RankFailure(0, failed + " and the store at " + store_at +
                              " does not answer: rank 0, which serves it, died or stopped (transport: " + transport +
                              ")");
  }
  return RankFailure(
      -1, failed + " and the launcher's store at " + store_at + " does not answer (transport: " + transport + ")");
}

}  // namespace

RankFailure RankGroup::diagnose(const char* what, const std::string& error) {
  impl_->failed = true;
  const std::string failed =
      "rank " + std::to_string(rank()) + " of " + std::to_string(world()) + ": " + what + " failed";
  const std::string transport = first_line(error);
  try {
    // A fresh connection with a short timeout: the group's own may be wedged.
    StoreBoard board(open_store(address_.host, address_.port, false, world(), kDiagnoseTimeout));
    return impl_->watch.blame(board, failed, transport, impl_->collectives.load(), address_.timeout);
  } catch (const std::exception&) {
    return store_silent(failed, address_, transport);
  }
}

}  // namespace memtrain::runtime
