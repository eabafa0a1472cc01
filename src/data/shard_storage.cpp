#include "data/shard_storage.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <memory>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace memtrain::data {

ShardStorage::ShardStorage(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".tar") paths_.push_back(entry.path().string());
  }
  if (ec) throw DataError("shard folder '" + dir + "' cannot be read: " + ec.message());
  if (paths_.empty())
    throw DataError("shard folder '" + dir + "' has no .tar shards; `memtrain data pack` writes them");
  std::sort(paths_.begin(), paths_.end());
  for (size_t s = 0; s < paths_.size(); ++s) {
    for (const ShardSample& sample : index_tar_shard(paths_[s])) {
      extents_.push_back({static_cast<int>(s), sample.offset, sample.length});
    }
    const int fd = ::open(paths_[s].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError("shard '" + paths_[s] + "' cannot be opened");
    fds_.push_back(fd);
    // Cold reads bypass the page cache; a file system without O_DIRECT
    // (tmpfs) gets -1 and page-cache reads after dropping the range instead.
    direct_fds_.push_back(::open(paths_[s].c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
  }
}

ShardStorage::~ShardStorage() {
  for (int fd : fds_) ::close(fd);
  for (int fd : direct_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

Bytes ShardStorage::dataset_bytes() const {
  Bytes total = 0;
  for (const SampleExtent& e : extents_) total += e.length;
  return total;
}

namespace {

constexpr std::int64_t kDirectAlign = 4096;  // covers every device's logical block size

void read_fully(int fd, std::uint8_t* into, std::int64_t length, std::int64_t offset, const std::string& shard) {
  std::int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, into + done, static_cast<size_t>(length - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw DataError("shard '" + shard + "' at byte offset " + std::to_string(offset + done) +
                      ": read failed (truncated since it was indexed?)");
    }
    done += n;
  }
}

}  // namespace

std::vector<std::uint8_t> ShardStorage::read(std::int64_t sample, bool cold) const {
  const SampleExtent& e = extents_.at(static_cast<size_t>(sample));
  std::vector<std::uint8_t> bytes(static_cast<size_t>(e.length));
  const int direct = direct_fds_[e.shard];
  if (cold && direct >= 0) {
    // O_DIRECT wants the offset, length and buffer aligned: read the aligned
    // blocks around the sample (the last may be short at the end of the file).
    const std::int64_t begin = e.offset / kDirectAlign * kDirectAlign;
    const std::int64_t end = (e.offset + e.length + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    std::unique_ptr<std::uint8_t, void (*)(void*)> buffer(
        static_cast<std::uint8_t*>(std::aligned_alloc(kDirectAlign, static_cast<size_t>(end - begin))), std::free);
    if (!buffer) throw Error("cannot allocate a read buffer of " + std::to_string(end - begin) + " bytes");
    std::int64_t done = 0;
    while (done < e.offset + e.length - begin) {
      const ssize_t n = ::pread(direct, buffer.get() + done, static_cast<size_t>(end - begin - done), begin + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw DataError("shard '" + paths_[e.shard] + "' at byte offset " + std::to_string(begin + done) +
                        ": read failed (truncated since it was indexed?)");
      }
      done += n;
    }
    std::copy_n(buffer.get() + (e.offset - begin), e.length, bytes.begin());
    return bytes;
  }
  const int fd = fds_[e.shard];
  if (cold) ::posix_fadvise(fd, e.offset, e.length, POSIX_FADV_DONTNEED);
  read_fully(fd, bytes.data(), e.length, e.offset, paths_[e.shard]);
  return bytes;
}

ShardSample ShardStorage::parse(std::int64_t sample, const std::vector<std::uint8_t>& bytes) const {
  const SampleExtent& e = extents_.at(static_cast<size_t>(sample));
  std::vector<ShardSample> one =
      read_tar_entries(bytes, paths_[e.shard] + " (sample at byte offset " + std::to_string(e.offset) + ")");
  if (one.size() != 1)
    throw DataError("shard '" + paths_[e.shard] + "' at byte offset " + std::to_string(e.offset) + ": not one sample");
  one[0].offset = e.offset;
  return std::move(one[0]);
}

Bytes process_storage_read_bytes() {
  std::ifstream io("/proc/self/io");
  std::string key;
  Bytes value = 0;
  while (io >> key >> value) {
    if (key == "read_bytes:") return value;
  }
  return -1;
}

std::string ShardStorage::where(std::int64_t sample) const {
  const SampleExtent& e = extents_.at(static_cast<size_t>(sample));
  return "shard '" + paths_[e.shard] + "' at byte offset " + std::to_string(e.offset);
}

}  // namespace memtrain::data
