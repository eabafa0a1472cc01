#include "data/tar_shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/error.h"

namespace memtrain::data {

namespace {

constexpr size_t kBlock = 512;

// ustar header field offsets and widths.
constexpr size_t kName = 0, kNameLen = 100;
constexpr size_t kMode = 100, kSize = 124, kMtime = 136, kChecksum = 148, kType = 156;
constexpr size_t kMagic = 257, kVersion = 263, kPrefix = 345, kPrefixLen = 155;

void put_octal(std::uint8_t* field, size_t width, std::uint64_t value) {
  // width-1 digits and a NUL, as tar writes them.
  std::snprintf(reinterpret_cast<char*>(field), width, "%0*llo", static_cast<int>(width - 1),
                static_cast<unsigned long long>(value));
}

std::uint64_t header_checksum(const std::uint8_t* h) {
  std::uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= kChecksum && i < kChecksum + 8) ? ' ' : h[i];
  return sum;
}

// An octal field: digits, optionally surrounded by spaces and NULs.
bool parse_octal(const std::uint8_t* field, size_t width, std::uint64_t* out) {
  size_t i = 0;
  while (i < width && (field[i] == ' ' || field[i] == 0)) ++i;
  if (i == width) {
    *out = 0;
    return true;
  }
  std::uint64_t v = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) v = v * 8 + (field[i] - '0');
  for (; i < width; ++i) {
    if (field[i] != ' ' && field[i] != 0) return false;
  }
  *out = v;
  return true;
}

std::string field_text(const std::uint8_t* field, size_t width) {
  const auto* end = std::find(field, field + width, 0);
  return std::string(reinterpret_cast<const char*>(field), static_cast<size_t>(end - field));
}

void check_name_part(const std::string& part, const std::string& what, const std::string& key) {
  if (part.empty() || part.find('/') != std::string::npos) {
    throw Error("shard sample '" + key + "': " + what + " '" + part + "' must be non-empty without '/'");
  }
}

}  // namespace

void write_tar_shard(const std::string& path, const std::vector<ShardSample>& samples) {
  std::vector<std::uint8_t> out;
  for (const ShardSample& s : samples) {
    check_name_part(s.key, "key", s.key);
    if (s.key.find('.') != std::string::npos) {
      throw Error("shard sample '" + s.key + "': a key may not contain '.'; the first '.' starts the extension");
    }
    if (s.files.empty()) throw Error("shard sample '" + s.key + "' has no files");
    for (const auto& [ext, bytes] : s.files) {
      check_name_part(ext, "extension", s.key);
      const std::string name = s.key + "." + ext;
      if (name.size() > kNameLen) {
        throw Error("shard sample '" + s.key + "': file name '" + name + "' is longer than ustar's 100 bytes");
      }
      std::uint8_t h[kBlock] = {};
      std::memcpy(h + kName, name.data(), name.size());
      put_octal(h + kMode, 8, 0644);
      put_octal(h + 108, 8, 0);  // uid
      put_octal(h + 116, 8, 0);  // gid
      put_octal(h + kSize, 12, bytes.size());
      put_octal(h + kMtime, 12, 0);  // fixed: the same samples give the same shard
      h[kType] = '0';
      std::memcpy(h + kMagic, "ustar", 6);
      std::memcpy(h + kVersion, "00", 2);
      std::snprintf(reinterpret_cast<char*>(h + kChecksum), 8, "%06llo",
                    static_cast<unsigned long long>(header_checksum(h)));
      h[kChecksum + 7] = ' ';
      out.insert(out.end(), h, h + kBlock);
      out.insert(out.end(), bytes.begin(), bytes.end());
      out.resize(out.size() + (kBlock - bytes.size() % kBlock) % kBlock, 0);
    }
  }
  out.resize(out.size() + 2 * kBlock, 0);  // the end-of-archive marker
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write shard '" + path + "'");
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!f.flush()) throw Error("writing shard '" + path + "' failed");
}

namespace {

// One walk over a tar's entries, shared by reading and indexing: headers come
// from `header_at` (512 bytes at an offset), file data stays where it is.
// Files are grouped into samples; `take_data(offset, size)` supplies a file's
// bytes (empty when only the layout is wanted). The walk ends at the
// end-of-archive marker, or with `marker_optional` also at the last byte.
std::vector<ShardSample> walk_tar(size_t total, const std::function<const std::uint8_t*(size_t)>& header_at,
                                  const std::function<std::vector<std::uint8_t>(size_t, size_t)>& take_data,
                                  const std::string& name, bool marker_optional) {
  std::vector<ShardSample> samples;
  auto fail = [&](size_t offset, const std::string& why) {
    return DataError("shard '" + name + "' at byte offset " + std::to_string(offset) + ": " + why);
  };
  size_t at = 0;
  while (true) {
    if (marker_optional && at == total) break;
    if (at + kBlock > total) {
      throw fail(at, total == at ? "ends without the end-of-archive marker (truncated?)" : "truncated inside a header");
    }
    const std::uint8_t* h = header_at(at);
    if (std::all_of(h, h + kBlock, [](std::uint8_t b) { return b == 0; })) break;  // end of archive
    std::uint64_t stored = 0, size = 0;
    if (!parse_octal(h + kChecksum, 8, &stored) || stored != header_checksum(h)) {
      throw fail(at, "header checksum does not match (corrupt?)");
    }
    if (!parse_octal(h + kSize, 12, &size)) throw fail(at, "size field is not an octal number");
    const size_t data_at = at + kBlock;
    if (size > total || data_at + size > total) {
      throw fail(at, "truncated: the entry needs " + std::to_string(size) + " bytes, " +
                         std::to_string(total - std::min(total, data_at)) + " are left");
    }
    const char type = static_cast<char>(h[kType]);
    std::string path = field_text(h + kName, kNameLen);
    if (std::memcmp(h + kMagic, "ustar", 5) == 0) {
      const std::string prefix = field_text(h + kPrefix, kPrefixLen);
      if (!prefix.empty()) path = prefix + "/" + path;
    }
    if (type == '0' || type == '\0') {
      const size_t slash = path.rfind('/');
      const std::string base = path.substr(slash == std::string::npos ? 0 : slash + 1);
      const size_t dot = base.find('.');
      if (dot == std::string::npos || dot == 0 || dot + 1 == base.size()) {
        throw fail(at, "file '" + path + "' has no key.extension name");
      }
      // The key keeps the directory, so a/1.jpg and b/1.jpg are two samples.
      const std::string key = path.substr(0, path.size() - base.size() + dot);
      const std::string ext = base.substr(dot + 1);
      if (samples.empty() || samples.back().key != key) samples.push_back({key, {}, static_cast<std::int64_t>(at)});
      if (!samples.back().files.emplace(ext, take_data(data_at, size)).second) {
        throw fail(at, "sample '" + key + "' has two files with extension '" + ext + "'");
      }
    } else if (type != '5' && type != 'x' && type != 'g' && type != 'L' && type != 'K') {
      throw fail(at, std::string("entry '") + path + "' has type '" + type + "'; expected regular files");
    } else if (type == 'L' || type == 'K') {
      throw fail(at, "GNU long-name entries are not supported; keep names under 100 bytes");
    }
    at = data_at + size + (kBlock - size % kBlock) % kBlock;
    if (!samples.empty()) samples.back().length = static_cast<std::int64_t>(at) - samples.back().offset;
  }
  return samples;
}

std::vector<ShardSample> walk_bytes(const std::vector<std::uint8_t>& data, const std::string& name,
                                    bool marker_optional) {
  return walk_tar(
      data.size(), [&](size_t at) { return data.data() + at; },
      [&](size_t at, size_t size) {
        return std::vector<std::uint8_t>(data.begin() + static_cast<std::ptrdiff_t>(at),
                                         data.begin() + static_cast<std::ptrdiff_t>(at + size));
      },
      name, marker_optional);
}

}  // namespace

std::vector<ShardSample> read_tar_shard(const std::vector<std::uint8_t>& data, const std::string& name) {
  return walk_bytes(data, name, false);
}

std::vector<ShardSample> read_tar_entries(const std::vector<std::uint8_t>& entries, const std::string& name) {
  return walk_bytes(entries, name, true);
}

std::vector<ShardSample> index_tar_shard(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("shard '" + path + "' cannot be opened");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw DataError("shard '" + path + "' cannot be read");
  std::uint8_t header[kBlock];
  return walk_tar(
      static_cast<size_t>(st.st_size),
      [&](size_t at) {
        if (::pread(fd, header, kBlock, static_cast<off_t>(at)) != static_cast<ssize_t>(kBlock)) {
          throw DataError("shard '" + path + "' at byte offset " + std::to_string(at) + ": header read failed");
        }
        return static_cast<const std::uint8_t*>(header);
      },
      [](size_t, size_t) { return std::vector<std::uint8_t>(); }, path, false);
}

std::vector<ShardSample> read_tar_shard(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError("shard '" + path + "' cannot be opened");
  const std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return read_tar_shard(data, path);
}

}  // namespace memtrain::data
