#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/error.h"
#include "data/jpeg_codec.h"
#include "data/shard_pack.h"
#include "data/tar_shard.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

using testing::gradient;

double mean_abs_difference(const GrayImage& a, const GrayImage& b) {
  double sum = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) sum += std::abs(a.pixels[i] - b.pixels[i]);
  return sum / static_cast<double>(a.pixels.size());
}

TEST(JpegCodec, RoundTripsAGreyImageCloselyAndRefusesCorruptBytes) {
  const GrayImage g = gradient(64, 48);
  const std::vector<std::uint8_t> jpeg = encode_gray_jpeg(g, 95);
  EXPECT_LT(jpeg.size(), g.pixels.size()) << "compressed";
  const GrayImage back = decode_gray_jpeg(jpeg, "test image");
  ASSERT_EQ(back.width, 64);
  ASSERT_EQ(back.height, 48);
  EXPECT_LT(mean_abs_difference(g, back), 2.0);
  try {
    decode_gray_jpeg(std::vector<std::uint8_t>(jpeg.begin() + 20, jpeg.end()), "shard s.tar, sample 000017");
    FAIL() << "decoded a JPEG without its header";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("shard s.tar, sample 000017: not a decodable JPEG"), std::string::npos);
  }
  EXPECT_THROW(encode_gray_jpeg(GrayImage{2, 2, {1, 2, 3}}, 90), Error);
  EXPECT_THROW(encode_gray_jpeg(g, 0), UsageError);
}

TEST(JpegCodec, BilinearResizeKeepsAConstantAndScalesAGradient) {
  GrayImage flat{3, 3, std::vector<std::uint8_t>(9, 77)};
  const GrayImage big = resize_square(flat, 8);
  EXPECT_EQ(big.pixels, std::vector<std::uint8_t>(64, 77));
  GrayImage ramp{2, 1, {0, 200}};
  const GrayImage r = resize_square(ramp, 4);
  EXPECT_EQ(r.pixels[0], 0);   // left edge clamps to the first pixel
  EXPECT_EQ(r.pixels[1], 50);  // a quarter of the way
  EXPECT_EQ(r.pixels[3], 200);
  EXPECT_THROW(resize_square(flat, 0), UsageError);
}

TEST(ShardPack, ImagesBecomeJpegShardsOfBoundedSize) {
  ImageDataset d;
  d.count = 40;
  d.rows = d.cols = 28;
  for (std::int64_t i = 0; i < d.count; ++i) {
    const GrayImage g = gradient(28, 28);
    d.pixels.insert(d.pixels.end(), g.pixels.begin(), g.pixels.end());
    d.labels.push_back(i % 10);
  }
  testing::TempDir dir;
  PackOptions o;
  o.resolution = 56;
  o.shard_size = 16 * 1024;
  o.limit = 30;
  const PackResult r = pack_images(d, dir.path() + "/out", "fm", o);
  EXPECT_EQ(r.samples, 30);
  ASSERT_GT(r.shards.size(), 1u) << "16 KiB shards cannot hold 30 images";
  std::int64_t seen = 0;
  Bytes total = 0;
  for (const std::string& path : r.shards) {
    const auto size = static_cast<Bytes>(std::filesystem::file_size(path));
    total += size;
    EXPECT_LE(size, o.shard_size) << path;
    for (const ShardSample& s : read_tar_shard(path)) {
      EXPECT_EQ(std::stoll(s.key), seen);
      EXPECT_EQ(std::string(s.files.at("cls").begin(), s.files.at("cls").end()), std::to_string(seen % 10));
      const GrayImage img = decode_gray_jpeg(s.files.at("jpg"), path);
      EXPECT_EQ(img.width, 56);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 30);
  EXPECT_EQ(total, r.bytes);
  EXPECT_EQ(r.shards[0], dir.path() + "/out/fm-000000.tar");
  o.shard_size = 100;
  EXPECT_THROW(pack_images(d, dir.path() + "/out2", "fm", o), UsageError);
}

TEST(ShardPack, SentencesKeepTheirWordsAndTags) {
  BrownCorpus c;
  c.sentences.push_back({{"The", "jury", "said"}, {"AT", "NN", "VBD"}});
  c.sentences.push_back({{"Yes"}, {"UH"}});
  testing::TempDir dir;
  const PackResult r = pack_sentences(c, dir.path(), "brown", {});
  ASSERT_EQ(r.shards.size(), 1u);
  const auto samples = read_tar_shard(r.shards[0]);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(std::string(samples[0].files.at("txt").begin(), samples[0].files.at("txt").end()), "The jury said");
  EXPECT_EQ(std::string(samples[0].files.at("tags").begin(), samples[0].files.at("tags").end()), "AT NN VBD");
  EXPECT_EQ(samples[1].key, "000001");
}

}  // namespace
}  // namespace memtrain::data
