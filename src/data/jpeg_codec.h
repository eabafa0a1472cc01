// Grey-scale JPEG encoding and decoding with libjpeg-turbo (Debian's
// libturbojpeg0-dev): what makes a packed image shard cost to decode what
// real image datasets cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::data {

struct GrayImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> pixels;  // height x width, row-major
};

// quality 1..100. Error for an empty image or a size that does not match.
std::vector<std::uint8_t> encode_gray_jpeg(const GrayImage& image, int quality);

// DataError naming `what` (e.g. "shard s.tar, sample 000017") for bytes that
// are not a JPEG libjpeg-turbo can decode. Colour JPEGs come back grey.
GrayImage decode_gray_jpeg(const std::vector<std::uint8_t>& jpeg, const std::string& what);

// Bilinear resize to `side` x `side` (pixel centres aligned, as image
// libraries do): how a 28 px Fashion-MNIST image becomes a 224 px one.
GrayImage resize_square(const GrayImage& image, std::int64_t side);

}  // namespace memtrain::data
