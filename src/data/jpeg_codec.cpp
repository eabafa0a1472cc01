#include "data/jpeg_codec.h"

#if MEMTRAIN_HAS_TURBOJPEG
#include <turbojpeg.h>
#endif

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"

namespace memtrain::data {

#if MEMTRAIN_HAS_TURBOJPEG

namespace {

struct Handle {
  tjhandle h;
  explicit Handle(tjhandle handle) : h(handle) {
    if (!h) throw Error("libjpeg-turbo: cannot create a handle");
  }
  ~Handle() { tjDestroy(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

}  // namespace

std::vector<std::uint8_t> encode_gray_jpeg(const GrayImage& image, int quality) {
  if (image.width <= 0 || image.height <= 0 || image.pixels.size() != static_cast<size_t>(image.width * image.height)) {
    throw Error("encode JPEG: a " + std::to_string(image.width) + "x" + std::to_string(image.height) + " image needs " +
                std::to_string(std::max<std::int64_t>(0, image.width * image.height)) + " pixels, got " +
                std::to_string(image.pixels.size()));
  }
  if (quality < 1 || quality > 100)
    throw UsageError("JPEG quality " + std::to_string(quality) + " is out of range; expected 1..100");
  Handle c(tjInitCompress());
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (tjCompress2(c.h, image.pixels.data(), static_cast<int>(image.width), 0, static_cast<int>(image.height), TJPF_GRAY,
                  &out, &size, TJSAMP_GRAY, quality, TJFLAG_ACCURATEDCT) != 0) {
    const std::string why = tjGetErrorStr2(c.h);
    tjFree(out);
    throw Error("encode JPEG: " + why);
  }
  std::vector<std::uint8_t> bytes(out, out + size);
  tjFree(out);
  return bytes;
}

GrayImage decode_gray_jpeg(const std::vector<std::uint8_t>& jpeg, const std::string& what) {
  Handle d(tjInitDecompress());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (jpeg.empty() ||
      tjDecompressHeader3(d.h, jpeg.data(), jpeg.size(), &width, &height, &subsampling, &colorspace) != 0) {
    throw DataError(what + ": not a decodable JPEG (" + (jpeg.empty() ? std::string("empty") : tjGetErrorStr2(d.h)) +
                    ")");
  }
  GrayImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height));
  if (tjDecompress2(d.h, jpeg.data(), jpeg.size(), image.pixels.data(), width, 0, height, TJPF_GRAY,
                    TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(d.h) == TJERR_FATAL) {
    throw DataError(what + ": JPEG data is corrupt (" + std::string(tjGetErrorStr2(d.h)) + ")");
  }
  return image;
}

#else

namespace {

[[noreturn]] void without_libjpeg_turbo(const std::string& what) {
  throw UsageError(what +
                   " needs libjpeg-turbo, and this build of memtrain was made without it; install its headers "
                   "(Debian: libturbojpeg0-dev; conda: libjpeg-turbo) and build memtrain again");
}

}  // namespace

std::vector<std::uint8_t> encode_gray_jpeg(const GrayImage&, int) { without_libjpeg_turbo("encoding a JPEG image"); }

GrayImage decode_gray_jpeg(const std::vector<std::uint8_t>&, const std::string& what) {
  without_libjpeg_turbo("decoding " + what);
}

#endif

GrayImage resize_square(const GrayImage& image, std::int64_t side) {
  if (side < 1) throw UsageError("resolution " + std::to_string(side) + " px is out of range; expected >= 1");
  GrayImage out;
  out.width = out.height = side;
  out.pixels.resize(static_cast<size_t>(side * side));
  const double sx = static_cast<double>(image.width) / static_cast<double>(side);
  const double sy = static_cast<double>(image.height) / static_cast<double>(side);
  for (std::int64_t y = 0; y < side; ++y) {
    const double fy = std::clamp((static_cast<double>(y) + 0.5) * sy - 0.5, 0.0, static_cast<double>(image.height - 1));
    const auto y0 = static_cast<std::int64_t>(fy);
    const std::int64_t y1 = std::min(y0 + 1, image.height - 1);
    const double wy = fy - static_cast<double>(y0);
    for (std::int64_t x = 0; x < side; ++x) {
      const double fx =
          std::clamp((static_cast<double>(x) + 0.5) * sx - 0.5, 0.0, static_cast<double>(image.width - 1));
      const auto x0 = static_cast<std::int64_t>(fx);
      const std::int64_t x1 = std::min(x0 + 1, image.width - 1);
      const double wx = fx - static_cast<double>(x0);
      auto p = [&](std::int64_t yy, std::int64_t xx) {
        return static_cast<double>(image.pixels[yy * image.width + xx]);
      };
      const double v =
          (1 - wy) * ((1 - wx) * p(y0, x0) + wx * p(y0, x1)) + wy * ((1 - wx) * p(y1, x0) + wx * p(y1, x1));
      out.pixels[y * side + x] = static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0, 255.0)));
    }
  }
  return out;
}

}  // namespace memtrain::data
