// ZeRO-1's split of Adam's state: the ranks' shards cover every element
// once, near-equally, and together update bit for bit what one Adam does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/model/adam.h"
#include "runtime/model/optimizer_shard.h"

namespace memtrain::runtime {
namespace {

TEST(OptimizerShard, RanksCoverEveryElementOnceInNearEqualParts) {
  const std::vector<std::int64_t> numels{7, 1, 0, 12, 5, 3};
  const std::int64_t total = 28;
  for (int world : {1, 2, 3, 4, 5, 28, 29}) {
    std::vector<int> owners(total, 0);
    for (int r = 0; r < world; ++r) {
      const std::vector<ElementRange> shard = optimizer_shard(numels, r, world);
      ASSERT_EQ(shard.size(), numels.size());
      std::int64_t mine = 0, offset = 0;
      for (std::size_t k = 0; k < numels.size(); ++k) {
        EXPECT_LE(0, shard[k].begin);
        EXPECT_LE(shard[k].begin, shard[k].end);
        EXPECT_LE(shard[k].end, numels[k]);
        for (std::int64_t i = shard[k].begin; i < shard[k].end; ++i) ++owners[offset + i];
        mine += shard[k].size();
        offset += numels[k];
      }
      EXPECT_LE(mine, total / world + 1) << r << " of " << world;
      EXPECT_GE(mine, total / world) << r << " of " << world;
    }
    for (std::int64_t i = 0; i < total; ++i) EXPECT_EQ(owners[i], 1) << "element " << i << ", world " << world;
  }
}

// Weights (one large enough for the threaded update) and gradients, the
// same for every optimizer built from them.
std::vector<torch::Tensor> weights() {
  torch::manual_seed(3);
  return {torch::randn({300, 1000}), torch::randn({17}), torch::randn({4, 5, 6})};
}

TEST(OptimizerShard, ShardedUpdatesTogetherEqualTheUnshardedBitForBit) {
  AdamOptions options;
  options.weight_decay = 0.01;
  std::vector<torch::Tensor> whole = weights();
  for (torch::Tensor& w : whole) w.set_requires_grad(true);
  Adam reference(whole, options);
  const int world = 3;
  std::vector<std::vector<torch::Tensor>> copies;
  std::vector<std::unique_ptr<Adam>> shards;
  std::vector<std::int64_t> numels;
  for (const torch::Tensor& w : whole) numels.push_back(w.numel());
  for (int r = 0; r < world; ++r) {
    copies.push_back(weights());
    for (torch::Tensor& w : copies.back()) w.set_requires_grad(true);
    shards.push_back(std::make_unique<Adam>(copies.back(), options, optimizer_shard(numels, r, world)));
    EXPECT_TRUE(shards.back()->sharded());
    EXPECT_LE(shards.back()->state_bytes(), reference.state_bytes() / world + 2 * 4);
  }
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(10 + step);
    for (std::size_t k = 0; k < whole.size(); ++k) {
      const torch::Tensor g = torch::randn_like(whole[k]);
      whole[k].mutable_grad().copy_(g);
      for (int r = 0; r < world; ++r) copies[r][k].mutable_grad().copy_(g);
    }
    reference.step();
    for (int r = 0; r < world; ++r) shards[r]->step();
    // Each rank's owned elements to every other rank, as the trainer shares them.
    torch::NoGradGuard no_grad;
    for (int r = 0; r < world; ++r) {
      for (std::size_t k = 0; k < whole.size(); ++k) {
        const ElementRange& own = shards[r]->owned(k);
        for (int other = 0; other < world; ++other) {
          copies[other][k]
              .view({-1})
              .narrow(0, own.begin, own.size())
              .copy_(copies[r][k].view({-1}).narrow(0, own.begin, own.size()));
        }
      }
    }
    for (int r = 0; r < world; ++r) {
      for (std::size_t k = 0; k < whole.size(); ++k) {
        EXPECT_TRUE(torch::equal(copies[r][k], whole[k])) << "rank " << r << ", weight " << k << ", step " << step;
      }
    }
  }
  // And the moments are the unsharded ones, piece by piece.
  for (int r = 0; r < world; ++r) {
    for (std::size_t k = 0; k < whole.size(); ++k) {
      const ElementRange& own = shards[r]->owned(k);
      EXPECT_TRUE(torch::equal(shards[r]->first_moment(k),
                               reference.first_moment(k).view({-1}).narrow(0, own.begin, own.size())));
      EXPECT_TRUE(torch::equal(shards[r]->second_moment(k),
                               reference.second_moment(k).view({-1}).narrow(0, own.begin, own.size())));
    }
  }
}

}  // namespace
}  // namespace memtrain::runtime
