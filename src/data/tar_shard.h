// Dataset shards as tar files in the WebDataset convention: files that share
// a base name (the path up to the first '.' of its last component) and follow
// each other form one sample, keyed by that base name, with one entry per
// extension, e.g. `000017.jpg` + `000017.cls`. Plain POSIX ustar, so GNU tar
// lists and extracts what memtrain writes, and memtrain reads what tar writes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace memtrain::data {

struct ShardSample {
  std::string key;                                         // the base name
  std::map<std::string, std::vector<std::uint8_t>> files;  // extension ("jpg", "cls") -> bytes
  std::int64_t offset = 0;                                 // byte offset of its first header in the shard
  std::int64_t length = 0;                                 // bytes from there to the end of its last file's blocks
};

// Writes `samples` as one shard. Error naming the path and the sample for a
// key or extension that cannot be a ustar name (empty, over 100 bytes with
// its extension, or holding a '.' in the key).
void write_tar_shard(const std::string& path, const std::vector<ShardSample>& samples);

// Reads a whole shard. DataError naming the shard and the byte offset for a
// truncated file, a header whose checksum does not match, or a size field
// that is not a number. Directories and pax/GNU extension headers are
// skipped; other entry types (links, devices) are refused.
std::vector<ShardSample> read_tar_shard(const std::string& path);
std::vector<ShardSample> read_tar_shard(const std::vector<std::uint8_t>& bytes, const std::string& name);

// Entries cut out of a shard (whole headers and blocks, no end-of-archive
// marker needed), as ShardStorage reads one sample: the same checks, no copy.
std::vector<ShardSample> read_tar_entries(const std::vector<std::uint8_t>& entries, const std::string& name);

// The shard's samples with their keys, offsets, lengths and extensions, read
// from the headers alone (the files' bytes are left empty): indexing a large
// shard reads a few bytes per file, not the shard.
std::vector<ShardSample> index_tar_shard(const std::string& path);

}  // namespace memtrain::data
