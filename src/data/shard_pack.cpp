#include "data/shard_pack.h"

#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "data/jpeg_codec.h"
#include "data/tar_shard.h"

namespace memtrain::data {

namespace {

std::vector<std::uint8_t> text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string numbered(const std::string& prefix, std::int64_t n, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(n));
  return prefix + buf;
}

// Tar bytes of a sample: a header and whole blocks per file.
Bytes tar_bytes(const ShardSample& s) {
  Bytes b = 0;
  for (const auto& [ext, bytes] : s.files) b += 512 + (static_cast<Bytes>(bytes.size()) + 511) / 512 * 512;
  return b;
}

PackResult pack(std::int64_t count, const std::function<ShardSample(std::int64_t)>& sample, const std::string& dir,
                const std::string& prefix, const PackOptions& options) {
  if (options.shard_size < 4096) {
    throw UsageError("shard size " + std::to_string(options.shard_size) + " bytes is too small; expected >= 4096");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("output folder '" + dir + "': cannot create the directory: " + ec.message());
  const std::int64_t n = options.limit > 0 ? std::min(options.limit, count) : count;
  PackResult result;
  std::vector<ShardSample> shard;
  Bytes shard_bytes = 1024;  // the end-of-archive marker
  auto flush = [&] {
    if (shard.empty()) return;
    const std::string path =
        dir + "/" + numbered(prefix + "-", static_cast<std::int64_t>(result.shards.size()), 6) + ".tar";
    write_tar_shard(path, shard);
    result.shards.push_back(path);
    result.bytes += shard_bytes;
    shard.clear();
    shard_bytes = 1024;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    ShardSample s = sample(i);
    const Bytes b = tar_bytes(s);
    if (!shard.empty() && shard_bytes + b > options.shard_size) flush();
    shard.push_back(std::move(s));
    shard_bytes += b;
  }
  flush();
  result.samples = n;
  return result;
}

}  // namespace

PackResult pack_images(const ImageDataset& data, const std::string& dir, const std::string& prefix,
                       const PackOptions& options) {
  const size_t per_image = static_cast<size_t>(data.rows * data.cols);
  return pack(
      data.count,
      [&](std::int64_t i) {
        GrayImage image;
        image.width = data.cols;
        image.height = data.rows;
        image.pixels.assign(data.pixels.begin() + static_cast<std::ptrdiff_t>(i * per_image),
                            data.pixels.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_image));
        ShardSample s;
        s.key = numbered("", i, 6);
        s.files["jpg"] = encode_gray_jpeg(resize_square(image, options.resolution), options.quality);
        s.files["cls"] = text_bytes(std::to_string(data.labels[i]));
        return s;
      },
      dir, prefix, options);
}

PackResult pack_sentences(const BrownCorpus& corpus, const std::string& dir, const std::string& prefix,
                          const PackOptions& options) {
  return pack(
      static_cast<std::int64_t>(corpus.sentences.size()),
      [&](std::int64_t i) {
        const TaggedSentence& t = corpus.sentences[i];
        std::string words, tags;
        for (size_t k = 0; k < t.words.size(); ++k) {
          words += (k ? " " : "") + t.words[k];
          tags += (k ? " " : "") + t.tags[k];
        }
        ShardSample s;
        s.key = numbered("", i, 6);
        s.files["txt"] = text_bytes(words);
        s.files["tags"] = text_bytes(tags);
        return s;
      },
      dir, prefix, options);
}

}  // namespace memtrain::data
