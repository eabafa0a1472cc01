// Fashion-MNIST in its IDX files (gzip-compressed, as Debian's
// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::data {

struct ImageDataset {
  std::int64_t count = 0;            // images
  std::int64_t rows = 0, cols = 0;   // pixels per image side (28 x 28)
  std::vector<std::uint8_t> pixels;  // count x rows x cols, 0..255
  std::vector<std::int64_t> labels;  // count, 0..classes-1
  std::int64_t classes = 10;
};

// Reads <dir>/train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz (or
// the t10k- pair when `split` is "test"). Throws DataError naming the file
// and what was expected for a missing, truncated or malformed file.
ImageDataset read_fashion_mnist(const std::string& dir, const std::string& split);

// `explicit_dir` if given, else $MEMTRAIN_FASHION_MNIST_DIR, else Debian's.
std::string find_fashion_mnist_directory(const std::string& explicit_dir);

// One IDX file, decompressed: exposed for tests of malformed input.
std::vector<std::uint8_t> read_gzip_file(const std::string& path);

}  // namespace memtrain::data
