#include "data/tar_shard.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
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

std::vector<ShardSample> read_tar_shard(const std::vector<std::uint8_t>& data, const std::string& name) {
  std::vector<ShardSample> samples;
  auto fail = [&](size_t offset, const std::string& why) {
    return DataError("shard '" + name + "' at byte offset " + std::to_string(offset) + ": " + why);
  };
  size_t at = 0;
  while (true) {
    if (at + kBlock > data.size()) {
      throw fail(at, data.size() == at ? "ends without the end-of-archive marker (truncated?)"
                                       : "truncated inside a header");
    }
    const std::uint8_t* h = data.data() + at;
    if (std::all_of(h, h + kBlock, [](std::uint8_t b) { return b == 0; })) break;  // end of archive
    std::uint64_t stored = 0, size = 0;
    if (!parse_octal(h + kChecksum, 8, &stored) || stored != header_checksum(h)) {
      throw fail(at, "header checksum does not match (corrupt?)");
    }
    if (!parse_octal(h + kSize, 12, &size)) throw fail(at, "size field is not an octal number");
    const size_t data_at = at + kBlock;
    if (size > data.size() || data_at + size > data.size()) {
      throw fail(at, "truncated: the entry needs " + std::to_string(size) + " bytes, " +
                         std::to_string(data.size() - std::min(data.size(), data_at)) + " are left");
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
      if (!samples.back().files.emplace(ext, std::vector<std::uint8_t>(data.begin() + data_at, data.begin() + data_at + size)).second) {
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

std::vector<ShardSample> read_tar_shard(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError("shard '" + path + "' cannot be opened");
  const std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return read_tar_shard(data, path);
}

}  // namespace memtrain::data
