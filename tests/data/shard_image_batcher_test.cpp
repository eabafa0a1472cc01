#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/seeded_order.h"
#include "data/shard_image_batcher.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

ShardBatchOptions options(int threads) {
  ShardBatchOptions o;
  o.batch_size = 8;
  o.min_scale = 12;
  o.max_scale = 40;
  o.seed = 5;
  o.prep.threads = threads;
  o.prep.queue_depth = 5;
  return o;
}

std::vector<AugmentedBatch> one_epoch(ShardImageBatcher& b) {
  std::vector<AugmentedBatch> out;
  for (std::int64_t i = 0; i < b.batches_per_epoch(); ++i) out.push_back(b.next());
  return out;
}

TEST(ShardImageBatcher, BatchesFollowTheSeededOrderWithOneDrawnSideEach) {
  testing::TempDir dir;
  const PackResult r = testing::pack_synthetic_images(50, 16 * 1024, dir.path());
  const ShardStorage storage(dir.path());
  ShardImageBatcher b(storage, nullptr, options(2));
  ASSERT_EQ(b.batches_per_epoch(), 7);
  const std::vector<std::int64_t> order = epoch_order(50, 5, 0);
  std::vector<std::int64_t> sides;
  std::int64_t seen = 0;
  for (const AugmentedBatch& a : one_epoch(b)) {
    EXPECT_EQ(a.epoch, 0);
    EXPECT_GE(a.side, 12);
    EXPECT_LE(a.side, 40);
    EXPECT_EQ(a.side, b.side_of(0, a.index));
    ASSERT_EQ(a.pixels.size(), static_cast<size_t>(a.batch * a.side * a.side));
    for (std::int64_t i = 0; i < a.batch; ++i)
      EXPECT_EQ(a.labels[i], order[seen + i] % 10) << "label of position " << seen + i;
    seen += a.batch;
    sides.push_back(a.side);
  }
  EXPECT_EQ(seen, 50) << "every sample once; the last batch holds the 2 left";
  std::sort(sides.begin(), sides.end());
  EXPECT_GT(std::unique(sides.begin(), sides.end()) - sides.begin(), 3) << "the side changes from batch to batch";
  const AugmentedBatch next = b.next();
  EXPECT_EQ(next.epoch, 1);
  EXPECT_EQ(next.labels[0], epoch_order(50, 5, 1)[0] % 10);
}

TEST(ShardImageBatcher, TheSameBatchesBitForBitWhateverTheNumberOfPrepThreads) {
  testing::TempDir dir;
  testing::pack_synthetic_images(40, 16 * 1024, dir.path());
  const ShardStorage storage(dir.path());
  ShardImageBatcher one(storage, nullptr, options(1)), four(storage, nullptr, options(4));
  for (int i = 0; i < 12; ++i) {  // into the second epoch
    const AugmentedBatch a = one.next(), b = four.next();
    EXPECT_EQ(a.side, b.side);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.pixels, b.pixels) << "batch " << i;
  }
}

// One rank of three prepares only its rows of each batch (as batch_rows()
// splits it: the first rows a row longer); the ranks' rows together are
// the whole batch, bit for bit, the epoch's short last batch included.
TEST(ShardImageBatcher, EachRankPreparesItsRowsOfEveryBatchAndTogetherTheyAreTheBatch) {
  testing::TempDir dir;
  testing::pack_synthetic_images(52, 16 * 1024, dir.path());  // 6 batches of 8 and one of 4
  const ShardStorage storage(dir.path());
  ShardImageBatcher whole(storage, nullptr, options(2));
  std::vector<std::unique_ptr<ShardImageBatcher>> ranks;
  for (int r = 0; r < 3; ++r) {
    ShardBatchOptions o = options(1);
    o.rank = r;
    o.ranks = 3;
    ranks.push_back(std::make_unique<ShardImageBatcher>(storage, nullptr, o));
  }
  for (int i = 0; i < 9; ++i) {  // into the second epoch
    const AugmentedBatch w = whole.next();
    std::vector<float> pixels;
    std::vector<std::int64_t> labels;
    for (int r = 0; r < 3; ++r) {
      const AugmentedBatch a = ranks[r]->next();
      EXPECT_EQ(a.index, w.index);
      EXPECT_EQ(a.side, w.side);
      EXPECT_EQ(a.batch, rank_rows(w.batch, r, 3).length) << "batch " << i << " rank " << r;
      pixels.insert(pixels.end(), a.pixels.begin(), a.pixels.end());
      labels.insert(labels.end(), a.labels.begin(), a.labels.end());
    }
    EXPECT_EQ(labels, w.labels) << "batch " << i;
    EXPECT_EQ(pixels, w.pixels) << "batch " << i;
  }
  // Each rank read only its own samples.
  for (int r = 0; r < 3; ++r) EXPECT_LT(ranks[r]->counters().delivered, 52) << "rank " << r;
  // The largest input too: rows of the first batch at max scale.
  const AugmentedBatch big = whole.largest(), mine = ranks[1]->largest();
  EXPECT_EQ(mine.batch, 3);
  EXPECT_EQ(mine.labels, std::vector<std::int64_t>(big.labels.begin() + 3, big.labels.begin() + 6));

  // A short last batch with fewer samples than ranks would leave one empty.
  ShardBatchOptions o = options(1);
  o.batch_size = 10;  // 52 = 5 x 10 + 2
  o.ranks = 3;
  try {
    ShardImageBatcher refused(storage, nullptr, o);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "a batch of 2 samples (of 52 in the shards, 10 a batch) cannot give each of 3 ranks a row; choose a "
                 "batch that leaves none of them empty");
  }
}

TEST(ShardImageBatcher, AugmentationDiffersBetweenEpochsAndLargestIsTheWholeImagesAtMaxScale) {
  testing::TempDir dir;
  testing::pack_synthetic_images(16, 16 * 1024, dir.path());
  const ShardStorage storage(dir.path());
  ShardBatchOptions o = options(2);
  o.min_scale = o.max_scale = 20;
  o.batch_size = 16;
  ShardImageBatcher b(storage, nullptr, o);
  const AugmentedBatch e0 = b.next(), e1 = b.next();
  EXPECT_EQ(e1.epoch, 1);
  EXPECT_NE(e0.pixels, e1.pixels) << "new crops and flips each epoch";
  const AugmentedBatch big = b.largest();
  EXPECT_EQ(big.batch, 16);
  EXPECT_EQ(big.side, 20);
  for (std::int64_t i = 0; i < 16; ++i) {  // sample i, decoded, whole, unflipped
    const GrayImage image = prepare_sample(storage, i, storage.read(i, false)).image;
    const std::vector<float> expected =
        crop_resize_normalise(image, {0, 0, image.width, image.height}, 20, false, o.augment);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), big.pixels.begin() + i * 400)) << "image " << i;
    EXPECT_EQ(big.labels[i], i % 10);
  }
}

TEST(ShardImageBatcher, ACorruptSampleStopsItOrLeavesItsBatchOneShort) {
  testing::TempDir dir;
  const PackResult r = testing::pack_synthetic_images(40, 16 * 1024, dir.path());
  testing::change_sample(r.shards, "000021", [](auto& files) { files["jpg"].resize(40); });
  const ShardStorage storage(dir.path());
  ShardImageBatcher strict(storage, nullptr, options(2));
  try {
    one_epoch(strict);
    FAIL() << "a corrupt JPEG went through";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("(sample 000021)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at byte offset"), std::string::npos) << e.what();
  }
  ShardBatchOptions o = options(3);
  o.prep.skip_corrupt = true;
  ShardImageBatcher lenient(storage, nullptr, o);
  const std::vector<std::int64_t> order = epoch_order(40, 5, 0);
  const std::int64_t position = std::find(order.begin(), order.end(), 21) - order.begin();
  std::int64_t total = 0;
  for (const AugmentedBatch& a : one_epoch(lenient)) {
    EXPECT_EQ(a.batch, a.index == position / 8 ? 7 : 8) << "batch " << a.index;
    total += a.batch;
  }
  EXPECT_EQ(total, 39);
  EXPECT_EQ(lenient.counters().skipped_corrupt, 1);
  EXPECT_EQ(lenient.next().epoch, 1) << "the next epoch goes on";
}

TEST(ShardImageBatcher, ALabelOutsideTheClassesIsCorruptAndSentenceShardsAreRefused) {
  testing::TempDir dir;
  const PackResult r = testing::pack_synthetic_images(16, 16 * 1024, dir.path() + "/img");
  testing::change_sample(r.shards, "000003", [](auto& files) { files["cls"] = {'1', '2'}; });
  const ShardStorage storage(dir.path() + "/img");
  ShardImageBatcher b(storage, nullptr, options(2));
  try {
    one_epoch(b);
    FAIL() << "label 12 of 10 classes went through";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("label '12' is not a class in 0..9"), std::string::npos) << e.what();
  }

  BrownCorpus corpus;
  corpus.sentences.push_back({{"The", "dog"}, {"AT", "NN"}});
  pack_sentences(corpus, dir.path() + "/text", "brown", PackOptions{});
  const ShardStorage text(dir.path() + "/text");
  try {
    ShardImageBatcher refused(text, nullptr, options(1));
    FAIL() << "sentence shards accepted as images";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no .jpg"), std::string::npos) << e.what();
  }
  ShardBatchOptions bad = options(1);
  bad.min_scale = 50;
  EXPECT_THROW(ShardImageBatcher(storage, nullptr, bad), UsageError);
}

}  // namespace
}  // namespace memtrain::data
