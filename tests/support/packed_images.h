// Small synthetic image datasets packed as shards, for the data pipeline's
// tests: `count` 28 x 28 images of a fixed pseudo-random pattern, label
// i % 10, resized to 32 px and packed into shards of `shard_size` bytes;
// and a way to damage one sample of them.
#pragma once

#include <functional>
#include <string>

#include "data/jpeg_codec.h"
#include "data/shard_pack.h"
#include "data/tar_shard.h"

namespace memtrain::testing {

// A smooth test pattern (JPEG keeps it close), width x height.
inline data::GrayImage gradient(std::int64_t width, std::int64_t height) {
  data::GrayImage g;
  g.width = width;
  g.height = height;
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      g.pixels.push_back(static_cast<std::uint8_t>((x * 255 / width + y * 64 / height) % 256));
    }
  }
  return g;
}

inline data::ImageDataset synthetic_images(std::int64_t count) {
  data::ImageDataset d;
  d.count = count;
  d.rows = d.cols = 28;
  for (std::int64_t i = 0; i < d.count * 28 * 28; ++i) d.pixels.push_back(static_cast<std::uint8_t>((i * 37) % 251));
  for (std::int64_t i = 0; i < d.count; ++i) d.labels.push_back(i % 10);
  return d;
}

inline data::PackResult pack_synthetic_images(std::int64_t count, Bytes shard_size, const std::string& dir) {
  data::PackOptions o;
  o.resolution = 32;
  o.shard_size = shard_size;
  return data::pack_images(synthetic_images(count), dir, "fm", o);
}

// Rewrites the shard holding sample `key` with `change` applied to its files.
inline void change_sample(const std::vector<std::string>& shards, const std::string& key,
                          const std::function<void(std::map<std::string, std::vector<std::uint8_t>>&)>& change) {
  for (const std::string& path : shards) {
    std::vector<data::ShardSample> samples = data::read_tar_shard(path);
    bool changed = false;
    for (data::ShardSample& s : samples) {
      if (s.key == key) {
        change(s.files);
        changed = true;
      }
    }
    if (changed) data::write_tar_shard(path, samples);
  }
}

}  // namespace memtrain::testing
