// `memtrain data pack`: datasets written as tar shards (tar_shard.h), so the
// input pipeline reads, decodes and augments what real datasets make it do.
// Fashion-MNIST images become grey JPEGs at a chosen resolution (`.jpg`)
// with their label (`.cls`, decimal text); Brown sentences become their
// words (`.txt`) and tags (`.tags`), space-separated. Keys are the sample's
// index, zero-padded; shards are `<prefix>-000000.tar`, ... in `dir`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"
#include "data/brown_corpus.h"
#include "data/fashion_mnist.h"

namespace memtrain::data {

struct PackOptions {
  std::int64_t resolution = 224;  // images: side in pixels
  int quality = 90;               // images: JPEG quality
  Bytes shard_size = 64 * MiB;    // a shard is closed before it would pass this (at least one sample each)
  std::int64_t limit = 0;         // samples packed; 0: all
};

struct PackResult {
  std::vector<std::string> shards;  // paths, in order
  std::int64_t samples = 0;
  Bytes bytes = 0;  // of all shards
};

PackResult pack_images(const ImageDataset& data, const std::string& dir, const std::string& prefix,
                       const PackOptions& options);
PackResult pack_sentences(const BrownCorpus& corpus, const std::string& dir, const std::string& prefix,
                          const PackOptions& options);

}  // namespace memtrain::data
