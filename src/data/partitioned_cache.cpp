#include "data/partitioned_cache.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "data/seeded_order.h"

namespace memtrain::data {

namespace peer_wire {

constexpr std::uint32_t kPeerCacheMagic = 0x4d545043;  // "MTPC"

// What two ranks must agree on to share caches: the same samples, cut the
// same way.
struct Fingerprint {
  std::int64_t samples = 0;
  std::int64_t dataset_bytes = 0;
  std::int64_t world = 0;
  std::uint64_t seed = 0;
  bool operator==(const Fingerprint& o) const {
    return samples == o.samples && dataset_bytes == o.dataset_bytes && world == o.world && seed == o.seed;
  }
};

std::string describe(const Fingerprint& f) {
  return std::to_string(f.samples) + " samples of " + std::to_string(f.dataset_bytes) + " bytes, " +
         std::to_string(f.world) + " ranks, seed " + std::to_string(f.seed);
}

bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    // MSG_NOSIGNAL: a peer gone mid-answer is an error here, not SIGPIPE.
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // closed, failed or timed out
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

template <typename T>
bool write_value(int fd, const T& v) {
  return write_all(fd, &v, sizeof(v));
}
template <typename T>
bool read_value(int fd, T& v) {
  return read_all(fd, &v, sizeof(v));
}

std::string last_error() { return errno == 0 ? "connection closed" : std::strerror(errno); }

}  // namespace peer_wire

using namespace peer_wire;

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int e = ::getaddrinfo(host.c_str(), "9", &hints, &found); e != 0)
    throw Error("cannot resolve '" + host + "': " + ::gai_strerror(e));
  // A UDP socket "connected" sends nothing; the kernel picks the route and
  // with it the source address.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const std::string why = std::strerror(errno);
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!ok) throw Error("no route to '" + host + "': " + why);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

std::vector<int> partition_owners(std::int64_t n, int world, std::uint64_t seed) {
  if (world < 1) throw UsageError("a partition needs at least one rank; got " + std::to_string(world));
  // Its own stream: the partition must not be any epoch's order.
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  SeededRandom random(seed ^ 0x9a77171035eed5ULL);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(random.below(static_cast<std::uint64_t>(i + 1)))]);
  std::vector<int> owners(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j)
    owners[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] = static_cast<int>(j * world / n);
  return owners;
}

struct PartitionedSampleCache::Peer {
  int rank = 0;
  std::string address;
  int fd = -1;
  std::mutex mutex;  // one request at a time on the connection
};

PartitionedSampleCache::PartitionedSampleCache(const ShardStorage& storage, Bytes capacity, int rank, int world,
                                               std::uint64_t seed, bool cold, const std::string& listen_host,
                                               Seconds timeout)
    : storage_(storage), rank_(rank), world_(world), seed_(seed), cold_(cold), timeout_(timeout),
      owners_(partition_owners(static_cast<std::int64_t>(storage.samples().size()), world, seed)),
      cache_(capacity, CachePolicy::minio) {
  if (rank < 0 || rank >= world)
    throw UsageError("rank " + std::to_string(rank) + " is out of range for " + std::to_string(world) + " ranks");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw Error(std::string("partitioned cache: cannot open a socket: ") + std::strerror(errno));
  const int yes = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, listen_host.c_str(), &a.sin_addr) != 1) {
    ::close(listen_fd_);
    throw UsageError("partitioned cache: '" + listen_host + "' is not an IPv4 address to listen on");
  }
  socklen_t len = sizeof(a);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 || ::listen(listen_fd_, world) != 0) {
    const std::string why = std::strerror(errno);
    ::close(listen_fd_);
    throw Error("partitioned cache: cannot listen on " + listen_host + ": " + why);
  }
  port_ = ntohs(a.sin_port);
  host_ = listen_host;
  acceptor_ = std::thread([this] {
    while (!stopping_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down
      }
      std::lock_guard<std::mutex> lock(served_mutex_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      served_fds_.push_back(fd);
      servers_.emplace_back([this, fd] { serve(fd); });
    }
  });
}

PartitionedSampleCache::~PartitionedSampleCache() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  for (auto& p : peers_)
    if (p->fd >= 0) ::close(p->fd);
  std::lock_guard<std::mutex> lock(served_mutex_);
  for (int fd : served_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes their recv()
  for (auto& t : servers_) t.join();
  for (int fd : served_fds_) ::close(fd);
}

std::string PartitionedSampleCache::address() const { return host_ + ":" + std::to_string(port_); }

void PartitionedSampleCache::connect(const std::vector<std::string>& addresses) {
  if (static_cast<int>(addresses.size()) != world_)
    throw Error("partitioned cache: " + std::to_string(addresses.size()) + " addresses for " + std::to_string(world_) +
                " ranks");
  const Fingerprint mine{static_cast<std::int64_t>(storage_.samples().size()), storage_.dataset_bytes(), world_, seed_};
  for (int r = 0; r < world_; ++r) {
    auto peer = std::make_unique<Peer>();
    peer->rank = r;
    peer->address = addresses[static_cast<std::size_t>(r)];
    if (r == rank_) {
      peers_.push_back(std::move(peer));
      continue;
    }
    const std::string who = "rank " + std::to_string(r) + " at " + peer->address;
    const auto colon = peer->address.rfind(':');
    if (colon == std::string::npos) throw Error("partitioned cache: " + who + " is not HOST:PORT");
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string host = peer->address.substr(0, colon), port = peer->address.substr(colon + 1);
    if (const int e = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); e != 0)
      throw Error("partitioned cache: cannot resolve " + who + ": " + ::gai_strerror(e));
    peer->fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const bool connected = peer->fd >= 0 && ::connect(peer->fd, found->ai_addr, found->ai_addrlen) == 0;
    ::freeaddrinfo(found);
    if (!connected) throw DataError("partitioned cache: cannot reach " + who + ": " + last_error());
    const int yes = 1;
    ::setsockopt(peer->fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    // A peer that stops answering is named after the timeout, not waited on forever.
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_);
    tv.tv_usec = static_cast<suseconds_t>((timeout_ - static_cast<double>(tv.tv_sec)) * 1e6);
    ::setsockopt(peer->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    Fingerprint theirs;
    std::uint32_t magic = 0;
    errno = 0;
    if (!write_value(peer->fd, kPeerCacheMagic) || !write_value(peer->fd, mine) || !read_value(peer->fd, magic) ||
        !read_value(peer->fd, theirs))
      throw DataError("partitioned cache: " + who + " did not answer the handshake: " + last_error());
    if (magic != kPeerCacheMagic) throw DataError("partitioned cache: " + who + " is not a memtrain partitioned cache");
    if (!(theirs == mine))
      throw DataError("partitioned cache: " + who + " holds " + describe(theirs) + "; this rank holds " +
                      describe(mine) + " (every rank needs the same data and seed)");
    peers_.push_back(std::move(peer));
  }
}

SampleCache::Sample PartitionedSampleCache::fetch_owned(std::int64_t index, bool* hit) {
  if (SampleCache::Sample cached = cache_.find(index)) {
    if (hit) *hit = true;
    return cached;
  }
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(storage_.read(index, cold_));
  storage_bytes_ += static_cast<Bytes>(bytes->size());
  cache_.offer(index, bytes);
  return bytes;
}

SampleCache::Sample PartitionedSampleCache::fetch(std::int64_t index) {
  if (index < 0 || index >= static_cast<std::int64_t>(owners_.size()))
    throw Error("partitioned cache: sample " + std::to_string(index) + " is out of range; the dataset has " +
                std::to_string(owners_.size()));
  ++lookups_;
  const int owner = owners_[static_cast<std::size_t>(index)];
  if (owner == rank_) {
    bool hit = false;
    SampleCache::Sample s = fetch_owned(index, &hit);
    if (hit) ++local_hits_;
    return s;
  }
  if (peers_.size() != static_cast<std::size_t>(world_)) throw Error("partitioned cache: fetch before connect()");
  Peer& peer = *peers_[static_cast<std::size_t>(owner)];
  const std::string who = "rank " + std::to_string(owner) + " at " + peer.address;
  std::lock_guard<std::mutex> lock(peer.mutex);
  std::int64_t length = 0;
  errno = 0;
  if (!write_value(peer.fd, index) || !read_value(peer.fd, length))
    throw DataError("partitioned cache: " + who + " did not send sample " + std::to_string(index) + ": " +
                    last_error());
  if (length < 0) {
    std::uint32_t size = 0;
    std::string why;
    if (read_value(peer.fd, size)) {
      why.resize(size);
      read_all(peer.fd, why.data(), size);
    }
    throw DataError("partitioned cache: " + who + " could not serve sample " + std::to_string(index) + ": " + why);
  }
  const std::int64_t expected = storage_.samples()[static_cast<std::size_t>(index)].length;
  if (length != expected)
    throw DataError("partitioned cache: " + who + " sent " + std::to_string(length) + " bytes for sample " +
                    std::to_string(index) + "; it has " + std::to_string(expected));
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(length));
  if (!read_all(peer.fd, bytes->data(), bytes->size()))
    throw DataError("partitioned cache: " + who + " stopped sending sample " + std::to_string(index) + ": " +
                    last_error());
  ++peer_fetches_;
  peer_bytes_ += length;
  return bytes;
}

void PartitionedSampleCache::serve(int fd) {
  const Fingerprint mine{static_cast<std::int64_t>(storage_.samples().size()), storage_.dataset_bytes(), world_, seed_};
  std::uint32_t magic = 0;
  Fingerprint theirs;
  if (!read_value(fd, magic) || magic != kPeerCacheMagic || !read_value(fd, theirs)) return;
  if (!write_value(fd, kPeerCacheMagic) || !write_value(fd, mine) || !(theirs == mine)) return;
  std::int64_t index = 0;
  while (!stopping_ && read_value(fd, index)) {
    std::string why;
    SampleCache::Sample bytes;
    if (index < 0 || index >= static_cast<std::int64_t>(owners_.size())) {
      why = "sample " + std::to_string(index) + " is out of range";
    } else if (owners_[static_cast<std::size_t>(index)] != rank_) {
      why = "sample " + std::to_string(index) + " belongs to rank " +
            std::to_string(owners_[static_cast<std::size_t>(index)]);
    } else {
      try {
        bytes = fetch_owned(index);
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    if (!bytes) {
      const std::int64_t failed = -1;
      const auto size = static_cast<std::uint32_t>(why.size());
      if (!write_value(fd, failed) || !write_value(fd, size) || !write_all(fd, why.data(), why.size())) return;
      continue;
    }
    const auto length = static_cast<std::int64_t>(bytes->size());
    // One message: the length and the bytes together, so no segment waits on an ACK.
    std::vector<std::uint8_t> message(sizeof(length) + bytes->size());
    std::memcpy(message.data(), &length, sizeof(length));
    std::memcpy(message.data() + sizeof(length), bytes->data(), bytes->size());
    // Counted before it is sent: once the peer has the bytes (and the ranks
    // meet to read their counters), this rank has counted them too.
    served_bytes_ += length;
    if (!write_all(fd, message.data(), message.size())) return;
  }
}

PartitionedCacheCounters PartitionedSampleCache::take_counters() {
  PartitionedCacheCounters c;
  c.lookups = lookups_.exchange(0);
  c.local_hits = local_hits_.exchange(0);
  c.peer_fetches = peer_fetches_.exchange(0);
  c.storage_bytes_read = storage_bytes_.exchange(0);
  c.peer_bytes_read = peer_bytes_.exchange(0);
  c.bytes_served = served_bytes_.exchange(0);
  return c;
}

}  // namespace memtrain::data
