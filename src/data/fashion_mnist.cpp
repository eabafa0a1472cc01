#include "data/fashion_mnist.h"

#if MEMTRAIN_HAS_ZLIB
#include <zlib.h>
#endif
#include <cstdlib>

#include "core/error.h"

namespace memtrain::data {

namespace {

std::uint32_t big_endian(const std::vector<std::uint8_t>& b, size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) |
         std::uint32_t{b[at + 3]};
}

}  // namespace

#if MEMTRAIN_HAS_ZLIB
std::vector<std::uint8_t> read_gzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DataError("Fashion-MNIST: file '" + path + "' cannot be opened; expected a gzip-compressed IDX file");
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  while (true) {
    const int got = gzread(f, buf, sizeof buf);
    if (got < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      throw DataError("Fashion-MNIST: file '" + path + "' is corrupt (" + msg + "); expected gzip data");
    }
    if (got == 0) break;
    out.insert(out.end(), buf, buf + got);
  }
  // gzread stops silently at a truncated stream; gzclose reports it.
  const int closed = gzclose(f);
  if (closed != Z_OK) {
    throw DataError("Fashion-MNIST: file '" + path + "' is truncated or corrupt (zlib code " + std::to_string(closed) +
                    ")");
  }
  return out;
}
#else
std::vector<std::uint8_t> read_gzip_file(const std::string& path) {
  throw UsageError("reading '" + path + "' needs zlib, and this build of memtrain was made without it; install its " +
                   "headers (Debian: zlib1g-dev; conda: zlib) and build memtrain again");
}
#endif

ImageDataset read_fashion_mnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "test") {
    throw UsageError("Fashion-MNIST: split '" + split + "' is not known; expected train or test");
  }
  const std::string prefix = dir + "/" + (split == "train" ? "train" : "t10k");
  const std::string image_path = prefix + "-images-idx3-ubyte.gz";
  const std::string label_path = prefix + "-labels-idx1-ubyte.gz";
  const std::vector<std::uint8_t> images = read_gzip_file(image_path);
  const std::vector<std::uint8_t> labels = read_gzip_file(label_path);

  if (images.size() < 16 || big_endian(images, 0) != 0x803) {
    throw DataError("Fashion-MNIST: file '" + image_path +
                    "' is not an IDX image file; expected magic number 0x00000803 and a 16-byte header");
  }
  if (labels.size() < 8 || big_endian(labels, 0) != 0x801) {
    throw DataError("Fashion-MNIST: file '" + label_path +
                    "' is not an IDX label file; expected magic number 0x00000801 and an 8-byte header");
  }
  ImageDataset d;
  d.count = big_endian(images, 4);
  d.rows = big_endian(images, 8);
  d.cols = big_endian(images, 12);
  const std::int64_t label_count = big_endian(labels, 4);
  const std::uint64_t expected_pixels = static_cast<std::uint64_t>(d.count) * d.rows * d.cols;
  if (images.size() - 16 != expected_pixels) {
    throw DataError("Fashion-MNIST: file '" + image_path + "' holds " + std::to_string(images.size() - 16) +
                    " pixel bytes; its header promises " + std::to_string(expected_pixels));
  }
  if (static_cast<std::int64_t>(labels.size() - 8) != label_count || label_count != d.count) {
    throw DataError("Fashion-MNIST: file '" + label_path + "' holds " + std::to_string(labels.size() - 8) +
                    " labels; expected " + std::to_string(d.count) + ", one per image");
  }
  d.pixels.assign(images.begin() + 16, images.end());
  d.labels.reserve(d.count);
  for (size_t i = 8; i < labels.size(); ++i) {
    if (labels[i] >= d.classes) {
      throw DataError("Fashion-MNIST: file '" + label_path + "' label " + std::to_string(i - 8) + " is " +
                      std::to_string(labels[i]) + "; expected 0..9");
    }
    d.labels.push_back(labels[i]);
  }
  return d;
}

std::string find_fashion_mnist_directory(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  if (const char* env = std::getenv("MEMTRAIN_FASHION_MNIST_DIR")) return env;
  return "/usr/share/datasets/fashion-mnist";
}

}  // namespace memtrain::data
