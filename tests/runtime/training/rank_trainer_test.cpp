// A trainer as one rank of a data-parallel job, in forked processes: the
// gradients are summed bucket by bucket beside the backward, and an attempt
// that runs out of budget after some sums have started is retried without
// summing anything twice or losing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include <torch/torch.h>

#include "core/fnv1a.h"
#include "runtime/input/brown_batches.h"
#include "runtime/input/rank_slice_batches.h"
#include "runtime/training/trainer.h"
#include "support/forked_ranks.h"
#include "support/tiny_tagging.h"

namespace memtrain::runtime {
namespace {

// Per process (every rank is a forked child): how many backwards of the
// faulty stage go through before one runs out of budget, as a
// misprediction would; -1: none does.
int backwards_before_failure = -1;

class PassThroughFailingOnce : public torch::autograd::Function<PassThroughFailingOnce> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) { return x.clone(); }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*, torch::autograd::tensor_list grads) {
    if (backwards_before_failure == 0) {
      backwards_before_failure = -1;
      throw OutOfBudget("device", 1, 0, 0);
    }
    if (backwards_before_failure > 0) --backwards_before_failure;
    return {grads[0]};
  }
};

struct FaultyImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return PassThroughFailingOnce::apply(x); }
};
TORCH_MODULE(Faulty);

// Stage 1 fails: the buckets of stages 2.. are summed before its backward.
StagedModel faulty_model() {
  std::vector<torch::nn::AnyModule> body;
  body.emplace_back(torch::nn::Embedding(62, 256));
  body.emplace_back(Faulty());
  for (int i = 0; i < 3; ++i) body.emplace_back(torch::nn::Linear(256, 256));
  return StagedModel::from_modules("faulty", std::move(body), torch::nn::AnyModule(torch::nn::Linear(256, 6)));
}

// Trains 10 steps as this rank; returns the losses and the final weights'
// digest, then, after a '#', each step's retries and summed buckets.
std::string train_rank(RankGroup& ranks, bool fail_in_step_6, bool weights_on_host = false) {
  CpuDeviceMemory memory;
  RankSliceBatches slices(std::make_unique<BrownBatches>(testing::shared_tiny_tagging(), 4 * ranks.world(), 5),
                          ranks.rank(), ranks.world());
  TrainerOptions o;
  o.steps.planner = "optimal";
  o.budget = {false, 0, 24 * MiB};
  o.ranks = &ranks;
  o.deterministic_reduce = true;
  if (weights_on_host) {
    // Harmony per rank: each stage's weights swapped in, its summed gradients sent to the host.
    o.steps.planner = "swap";
    o.weights_on_host = true;
    o.micro_batches = 2;
    o.steps.device_to_host_bandwidth = o.steps.host_to_device_bandwidth = 4e9;
    o.budget = {false, 0, 6 * MiB};
  }
  Trainer trainer(o, memory, faulty_model, slices);
  trainer.on_step = [&](const StepRecord& r) {
    // The last micro-batch's backward: the buckets above the faulty stage are summed by then.
    if (fail_in_step_6 && ranks.rank() == 0 && r.step == 5) backwards_before_failure = o.micro_batches - 1;
  };
  std::ostringstream out, steps;
  for (int s = 0; s < 10; ++s) {
    const StepRecord r = trainer.step();
    out << r.loss << " ";
    steps << r.retries << ":" << r.reduce.buckets << " ";
  }
  Fnv1a digest;
  for (const torch::Tensor& p : trainer.model().parameters()) digest.add(p.data_ptr(), p.nbytes());
  out << hex_digest(digest.value());
  return out.str() + "#" + steps.str();
}

void expect_retry_after_sums_exact(bool weights_on_host) {
  const auto clean = testing::run_ranks(2, 60, [&](RankGroup& g) { return train_rank(g, false, weights_on_host); });
  const auto faulty = testing::run_ranks(2, 60, [&](RankGroup& g) { return train_rank(g, true, weights_on_host); });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(clean[r].status, 0) << clean[r].text;
    ASSERT_EQ(faulty[r].status, 0) << faulty[r].text;
  }
  const auto trained = [](const std::string& text) { return text.substr(0, text.find('#')); };
  // Every rank, faulty or not, ends with the same losses and weights.
  EXPECT_EQ(trained(clean[0].text), trained(clean[1].text));
  EXPECT_EQ(trained(faulty[0].text), trained(clean[0].text));
  EXPECT_EQ(trained(faulty[1].text), trained(clean[0].text));

  // Step 6 of rank 0 was retried, and its retry summed only the buckets
  // the failed attempt had not started (the others' sums stood).
  std::istringstream steps(faulty[0].text.substr(faulty[0].text.find('#') + 1));
  std::vector<std::pair<int, int>> per_step;  // retries, buckets summed by the run that completed
  for (std::string item; steps >> item;)
    per_step.emplace_back(std::stoi(item.substr(0, item.find(':'))), std::stoi(item.substr(item.find(':') + 1)));
  ASSERT_EQ(per_step.size(), 10u);
  int buckets = 0;
  for (const auto& [retries, summed] : per_step) buckets = std::max(buckets, summed);
  ASSERT_GE(buckets, 2) << "the gradients travel in several buckets";
  EXPECT_EQ(per_step[5].first, 1);
  EXPECT_GT(per_step[5].second, 0);
  EXPECT_LT(per_step[5].second, buckets);
  for (int s = 0; s < 10; ++s) {
    if (s != 5) EXPECT_EQ(per_step[s], std::make_pair(0, buckets)) << "step " << s + 1;
  }
}

TEST(RankTrainer, AStepRetriedAfterSomeSumsStartedTrainsExactlyAsOneThatNeverFailed) {
  expect_retry_after_sums_exact(false);
}

// With the weights in host memory every stage is a bucket; the sums a failed
// attempt made stand in host memory, and the retry's updates use them.
TEST(RankTrainer, WithWeightsInHostMemoryARetriedStepKeepsTheSumsItMade) { expect_retry_after_sums_exact(true); }

}  // namespace
}  // namespace memtrain::runtime
