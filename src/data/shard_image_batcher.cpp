#include "data/shard_image_batcher.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/parse_number.h"
#include "core/units.h"

namespace memtrain::data {

namespace {
std::uint64_t mix(std::uint64_t seed, std::int64_t a, std::int64_t b) {
  SeededRandom r(seed * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(a) << 32) ^ static_cast<std::uint64_t>(b));
  return r.next();
}
}  // namespace

ShardImageBatcher::ShardImageBatcher(const ShardStorage& storage, SampleCache* cache, ShardBatchOptions options)
    : storage_(storage), options_(std::move(options)) {
  if (options_.batch_size < 1) {
    throw UsageError("batch size " + std::to_string(options_.batch_size) + " is out of range; expected >= 1");
  }
  if (options_.min_scale < 1 || options_.min_scale > options_.max_scale) {
    throw UsageError("scale range " + std::to_string(options_.min_scale) + ".." + std::to_string(options_.max_scale) +
                     " are out of range; expected 1 <= min <= max");
  }
  if (options_.classes < 1)
    throw UsageError("classes " + std::to_string(options_.classes) + " is out of range; expected >= 1");
  if (options_.ranks < 1 || options_.rank < 0 || options_.rank >= options_.ranks) {
    throw UsageError("rank " + std::to_string(options_.rank) + " is out of range for " +
                     std::to_string(options_.ranks) + " ranks; expected 0.." + std::to_string(options_.ranks - 1));
  }
  // Every rank needs a row of every batch, the epoch's last (short) one included.
  const auto samples = static_cast<std::int64_t>(storage_.samples().size());
  const std::int64_t last = samples % options_.batch_size;
  if (options_.batch_size < options_.ranks || (last > 0 && last < options_.ranks)) {
    throw UsageError("a batch of " + std::to_string(last > 0 && last < options_.ranks ? last : options_.batch_size) +
                     " samples (of " + std::to_string(samples) + " in the shards, " +
                     std::to_string(options_.batch_size) + " a batch) cannot give each of " +
                     std::to_string(options_.ranks) + " ranks a row; choose a batch that leaves none of them empty");
  }
  check_augment_options(options_.augment);
  // Fail before the threads start on shards that hold no images (Brown's).
  if (!storage_.samples().empty()) {
    const ShardSample first = storage_.parse(0, storage_.read(0, /*cold=*/false));
    if (!first.files.count("jpg")) {
      std::string exts;
      for (const auto& [ext, bytes] : first.files) exts += (exts.empty() ? "." : ", .") + ext;
      throw DataError(
          storage_.where(0) + ": sample " + first.key + " has " + exts +
          " but no .jpg; training reads image shards that hold a .jpg per sample, as `memtrain data pack` writes them");
    }
  }
  PrepOptions prep = options_.prep;
  prep.seed = options_.seed;
  prep.transform = [this](PreparedSample& s) { augment_sample(storage_, options_, s); };
  if (options_.ranks > 1) {
    prep.keep = [this](std::int64_t position) {
      const RankRows mine = rows_of(position / options_.batch_size);
      const std::int64_t row = position % options_.batch_size;
      return row >= mine.offset && row < mine.offset + mine.length;
    };
  }
  pipeline_ = std::make_unique<PrepPipeline>(storage_, cache, prep);
}

std::int64_t ShardImageBatcher::batches_per_epoch() const {
  const auto n = static_cast<std::int64_t>(storage_.samples().size());
  return (n + options_.batch_size - 1) / options_.batch_size;
}

RankRows ShardImageBatcher::rows_of(std::int64_t batch) const {
  const auto samples = static_cast<std::int64_t>(storage_.samples().size());
  const std::int64_t rows = std::min(options_.batch_size, samples - batch * options_.batch_size);
  return rank_rows(rows, options_.rank, options_.ranks);
}

std::int64_t batch_side(const ShardBatchOptions& o, std::int64_t epoch, std::int64_t batch) {
  const auto span = static_cast<std::uint64_t>(o.max_scale - o.min_scale + 1);
  return o.min_scale + static_cast<std::int64_t>(mix(o.seed, epoch, batch) % span);
}

std::int64_t sample_label(const ShardStorage& storage, const ShardBatchOptions& o, const PreparedSample& s) {
  const std::string text = trim(s.label);
  const std::int64_t label = parse_whole_integer(text).value_or(-1);
  if (label < 0 || label >= o.classes) {
    throw DataError(storage.where(s.index) + " (sample " + s.key + "): label '" + text + "' is not a class in 0.." +
                    std::to_string(o.classes - 1) + (s.label.empty() ? "; the sample has no .cls file" : ""));
  }
  return label;
}

void augment_sample(const ShardStorage& storage, const ShardBatchOptions& o, PreparedSample& s) {
  if (s.image.pixels.empty()) throw DataError(storage.where(s.index) + " (sample " + s.key + "): no .jpg image");
  s.class_index = sample_label(storage, o, s);  // a bad label is found where a bad JPEG is: while preparing
  // The sample's own stream: the same crop and flip whichever thread or job runs it.
  SeededRandom rng(mix(o.seed ^ 0xA5A5A5A5ull, s.epoch, s.index));
  s.augmented = augment_image(s.image, batch_side(o, s.epoch, s.position / o.batch_size), o.augment, rng);
  s.image = GrayImage{};  // the decoded pixels are no longer needed
}

AugmentedBatch prepare_image_batch(const ShardStorage& storage, SampleCache* cache, const ShardBatchOptions& o,
                                   std::int64_t epoch, std::int64_t batch, std::int64_t* skipped) {
  const auto n = static_cast<std::int64_t>(storage.samples().size());
  const std::vector<std::int64_t> order = epoch_order(n, o.seed, epoch);
  AugmentedBatch b;
  b.epoch = epoch;
  b.index = batch;
  b.side = batch_side(o, epoch, batch);
  for (std::int64_t position = batch * o.batch_size; position < std::min(n, (batch + 1) * o.batch_size); ++position) {
    const std::int64_t index = order[static_cast<size_t>(position)];
    try {
      PreparedSample s = prepare_sample(storage, index, *fetch_sample(storage, cache, index, o.prep.cold));
      s.epoch = epoch;
      s.position = position;
      augment_sample(storage, o, s);
      b.pixels.insert(b.pixels.end(), s.augmented.begin(), s.augmented.end());
      b.labels.push_back(s.class_index);
      ++b.batch;
    } catch (const DataError&) {
      if (!o.prep.skip_corrupt) throw;
      if (skipped) ++*skipped;
    }
  }
  return b;
}

AugmentedBatch ShardImageBatcher::next() {
  AugmentedBatch b;
  while (true) {
    if (!pending_) {
      pending_ = pipeline_->next();
      if (!pending_) {  // the epoch ended
        if (b.batch > 0) return b;
        if (pipeline_->counters().delivered == 0) {
          throw DataError("every sample of the shards was skipped as corrupt; nothing to train on");
        }
        continue;
      }
    }
    const std::int64_t index = pending_->position / options_.batch_size;
    if (b.batch > 0 && (pending_->epoch != b.epoch || index != b.index)) return b;  // the next batch's
    if (b.batch == 0) {
      b.epoch = epoch_ = pending_->epoch;
      b.index = index;
      b.side = side_of(b.epoch, index);
    }
    b.pixels.insert(b.pixels.end(), pending_->augmented.begin(), pending_->augmented.end());
    b.labels.push_back(pending_->class_index);
    ++b.batch;
    pending_.reset();
    if (b.batch == rows_of(b.index).length) return b;
  }
}

AugmentedBatch ShardImageBatcher::largest() const { return largest_image_batch(storage_, options_); }

AugmentedBatch largest_image_batch(const ShardStorage& storage, const ShardBatchOptions& options) {
  AugmentedBatch b;
  b.side = options.max_scale;
  const auto n = static_cast<std::int64_t>(storage.samples().size());
  for (std::int64_t i = 0; i < n && b.batch < options.batch_size; ++i) {
    PreparedSample s;
    try {
      s = prepare_sample(storage, i, storage.read(i, /*cold=*/false));
      if (s.image.pixels.empty()) continue;
      b.labels.push_back(sample_label(storage, options, s));
    } catch (const DataError&) {
      if (!options.prep.skip_corrupt) throw;
      continue;
    }
    const CropBox whole{0, 0, s.image.width, s.image.height};
    const std::vector<float> px = crop_resize_normalise(s.image, whole, b.side, false, options.augment);
    b.pixels.insert(b.pixels.end(), px.begin(), px.end());
    ++b.batch;
  }
  if (b.batch == 0) throw DataError("the shards have no image sample to measure the largest input with");
  if (options.ranks == 1) return b;
  // This rank's rows of it.
  const RankRows mine = rank_rows(b.batch, options.rank, options.ranks);
  const std::int64_t pixels = b.side * b.side;
  AugmentedBatch out = b;
  out.batch = mine.length;
  out.labels.assign(b.labels.begin() + mine.offset, b.labels.begin() + mine.offset + mine.length);
  out.pixels.assign(b.pixels.begin() + mine.offset * pixels, b.pixels.begin() + (mine.offset + mine.length) * pixels);
  return out;
}

}  // namespace memtrain::data
