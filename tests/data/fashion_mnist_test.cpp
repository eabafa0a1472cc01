#include <set>

#include <gtest/gtest.h>
#include <zlib.h>

#include "core/error.h"
#include "data/fashion_mnist.h"
#include "data/image_batcher.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

std::string gzip(const std::string& raw) {
  testing::TempDir dir;
  const std::string p = dir.path() + "/x.gz";
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(f);
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// A tiny valid pair: 3 images of 2x2 and their labels.
void write_tiny(const testing::TempDir& dir, const std::string& images_tail = "", int image_magic = 0x803) {
  dir.write("train-images-idx3-ubyte.gz",
            gzip(be32(image_magic) + be32(3) + be32(2) + be32(2) + std::string(12, '\x07') + images_tail));
  dir.write("train-labels-idx1-ubyte.gz", gzip(be32(0x801) + be32(3) + std::string("\x01\x02\x09", 3)));
}

// What reading the dataset in `dir` throws.
std::string mnist_error(const std::string& dir) {
  try {
    read_fashion_mnist(dir, "train");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(FashionMnist, ReadsATinyValidPair) {
  testing::TempDir dir;
  write_tiny(dir);
  const ImageDataset d = read_fashion_mnist(dir.path(), "train");
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.rows, 2);
  EXPECT_EQ(d.labels, (std::vector<std::int64_t>{1, 2, 9}));
  EXPECT_EQ(d.pixels.size(), 12u);
}

TEST(FashionMnist, ErrorsNameTheFileAndWhatWasExpected) {
  testing::TempDir dir;
  write_tiny(dir, "extra");
  EXPECT_NE(mnist_error(dir.path()).find("header promises 12"), std::string::npos) << mnist_error(dir.path());
  write_tiny(dir, "", 0x1234);
  EXPECT_NE(mnist_error(dir.path()).find("expected magic number 0x00000803"), std::string::npos);
  const std::string good = gzip(be32(0x803) + be32(3) + be32(2) + be32(2) + std::string(12, '\x07'));
  const std::string path = dir.write("train-images-idx3-ubyte.gz", good.substr(0, good.size() - 6));
  EXPECT_NE(mnist_error(dir.path()).find("'" + path + "' is truncated or corrupt"), std::string::npos)
      << mnist_error(dir.path());
  EXPECT_NE(mnist_error("/nonexistent").find("/nonexistent/train-images-idx3-ubyte.gz' cannot be opened"),
            std::string::npos);
}

// The real dataset, from Debian's dataset-fashion-mnist.
TEST(FashionMnist, TheInstalledDatasetHasItsKnownShape) {
  const ImageDataset d = read_fashion_mnist(find_fashion_mnist_directory(""), "train");
  EXPECT_EQ(d.count, 60000);
  EXPECT_EQ(d.rows, 28);
  EXPECT_EQ(d.cols, 28);
  EXPECT_EQ(std::set<std::int64_t>(d.labels.begin(), d.labels.end()).size(), 10u);
}

TEST(ImageBatcher, DrawsAScalePerBatchWithinTheRange) {
  ImageDataset d;
  d.count = 50;
  d.rows = d.cols = 4;
  d.pixels.assign(50 * 16, 1);
  for (int i = 0; i < 50; ++i) d.labels.push_back(i % 10);
  ImageBatcher b(d, 8, 28, 112, 3);
  std::set<std::int64_t> scales;
  for (int i = 0; i < 20; ++i) {
    const ImageBatch x = b.next();
    EXPECT_GE(x.scale, 28);
    EXPECT_LE(x.scale, 112);
    EXPECT_EQ(x.pixels.size(), static_cast<size_t>(x.batch) * 16);
    scales.insert(x.scale);
  }
  EXPECT_GT(scales.size(), 5u);
  EXPECT_EQ(b.largest().scale, 112);
  EXPECT_THROW(ImageBatcher(d, 8, 50, 20, 1), UsageError);
}

}  // namespace
}  // namespace memtrain::data
