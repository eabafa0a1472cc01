#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/model/rng_snapshot.h"

namespace memtrain::runtime {
namespace {

TEST(RngSnapshot, RestoresOwnAndDefaultGenerators) {
  at::Generator own = at::make_generator<at::CPUGeneratorImpl>(5);
  const RngSnapshot snap = RngSnapshot::capture(own);
  const torch::Tensor a = torch::empty({64}).bernoulli_(0.5, own);
  const torch::Tensor n = torch::randn({3});  // the default generator, normal cache included
  const torch::Tensor n1 = torch::randn({1});
  snap.restore(own);
  EXPECT_TRUE(torch::equal(torch::empty({64}).bernoulli_(0.5, own), a));
  EXPECT_TRUE(torch::equal(torch::randn({3}), n));
  EXPECT_TRUE(torch::equal(torch::randn({1}), n1));
}

}  // namespace
}  // namespace memtrain::runtime
