// Packed shards as storage: an index of every sample's byte range, and reads
// of those ranges that can be made really cold, so what a cache saves is
// measured in bytes that came from the device, not from the OS page cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"
#include "data/tar_shard.h"

namespace memtrain::data {

struct SampleExtent {
  int shard = 0;            // index into ShardStorage::shards()
  std::int64_t offset = 0;  // first header
  std::int64_t length = 0;  // through its last file's blocks
};

class ShardStorage {
 public:
  // Every `*.tar` in `dir`, in name order. DataError when there is none, or
  // (naming the shard and offset) for a shard that does not parse.
  explicit ShardStorage(const std::string& dir);
  ~ShardStorage();
  ShardStorage(const ShardStorage&) = delete;
  ShardStorage& operator=(const ShardStorage&) = delete;

  const std::vector<std::string>& shards() const { return paths_; }
  const std::vector<SampleExtent>& samples() const { return extents_; }
  Bytes dataset_bytes() const;  // sum of the samples' lengths

  // The sample's bytes as stored: its tar entries (parse() reads them). When
  // `cold`, the read bypasses the page cache (O_DIRECT, on the aligned
  // blocks around the sample), so it goes to the device; where the file
  // system has no O_DIRECT, the range's pages are dropped first
  // (posix_fadvise DONTNEED, which keeps partial and dirty pages). Thread-safe.
  std::vector<std::uint8_t> read(std::int64_t sample, bool cold) const;
  // The sample parsed; DataError naming the shard and offset when corrupt.
  ShardSample parse(std::int64_t sample, const std::vector<std::uint8_t>& bytes) const;
  // "shard 'PATH' at byte offset N": where a sample's error points.
  std::string where(std::int64_t sample) const;

 private:
  std::string dir_;
  std::vector<std::string> paths_;
  std::vector<int> fds_;
  std::vector<int> direct_fds_;  // O_DIRECT, or -1 where the file system refuses it
  std::vector<SampleExtent> extents_;
};

// Bytes this process has caused to be fetched from storage devices so far
// (/proc/self/io read_bytes); -1 where the kernel does not report it.
Bytes process_storage_read_bytes();

}  // namespace memtrain::data
