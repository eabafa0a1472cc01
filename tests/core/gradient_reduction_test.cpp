#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/chain_json.h"
#include "core/error.h"
#include "core/gradient_reduction.h"

namespace memtrain {
namespace {

TEST(GradientReduction, BucketsGoFromTheLastStageDownUpToTheirSize) {
  // Stage bytes 0..4: the last two fit one bucket of 10, stage 2 starts the next.
  EXPECT_EQ(bucket_first_stages({4, 4, 6, 5, 5}, 10), (std::vector<int>{3, 1, 0}));
  // A stage larger than a bucket is a bucket of its own.
  EXPECT_EQ(bucket_first_stages({1, 30, 1}, 10), (std::vector<int>{2, 1, 0}));
  // Everything fits one bucket.
  EXPECT_EQ(bucket_first_stages({1, 2, 3}, 100), (std::vector<int>{0}));
  // Stages without gradients never start a bucket: the loss stage and a
  // weightless stage between go with the bucket below them.
  EXPECT_EQ(bucket_first_stages({5, 0, 5, 0}, 6), (std::vector<int>{2, 0}));
  // Pieces of 0 bytes (every weight alone): a bucket per stage with gradients.
  EXPECT_EQ(bucket_first_stages({3, 0, 3, 3}, 0), (std::vector<int>{3, 2, 0}));
  EXPECT_EQ(bucket_holding({3, 1, 0}, 4), 0);
  EXPECT_EQ(bucket_holding({3, 1, 0}, 2), 1);
  EXPECT_EQ(bucket_holding({3, 1, 0}, 0), 2);
}

TEST(GradientReduction, PricesABucketByItsCollectivesAndBytes) {
  NetworkModel net{0.001, 1e-9};
  EXPECT_DOUBLE_EQ(net.seconds({0, 2'000'000, 3}), 0.003 + 0.002);
}

nlohmann::json two_stages() {
  return nlohmann::json::parse(R"({"stages": [
      {"forward_time": 1, "backward_time": 2, "input_bytes": 10, "saved_bytes": 20, "param_bytes": 8, "state_bytes": 24},
      {"forward_time": 1, "backward_time": 2, "input_bytes": 10, "saved_bytes": 20, "param_bytes": 8, "state_bytes": 24}],
    "output_bytes": 4})");
}

TEST(GradientReduction, AChainFileCarriesItsBucketsAndNetwork) {
  nlohmann::json j = two_stages();
  j["reduction"] = {
      {"buckets", {{{"first_stage", 1}, {"bytes", 8}}, {{"first_stage", 0}, {"bytes", 8}, {"collectives", 2}}}},
      {"reserve_bytes", 16},
      {"latency", 0.001},
      {"seconds_per_byte", 1e-9}};
  const Chain c = chain_from_json(j, "test");
  ASSERT_EQ(c.reduction.buckets.size(), 2u);
  EXPECT_EQ(c.reduction.first_stages(), (std::vector<int>{1, 0}));
  EXPECT_EQ(c.reduction.buckets[0].collectives, 1);
  EXPECT_EQ(c.reduction.buckets[1].collectives, 2);
  EXPECT_EQ(c.reduction.reserve_bytes, 16);
  const Chain again = chain_from_json(chain_to_json(c), "again");
  EXPECT_EQ(again.reduction.first_stages(), c.reduction.first_stages());
  EXPECT_DOUBLE_EQ(again.reduction.network.latency, 0.001);
}

std::string refusal(const nlohmann::json& reduction) {
  nlohmann::json j = two_stages();
  j["reduction"] = reduction;
  try {
    chain_from_json(j, "chain");
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(GradientReduction, BadBucketsAreNamed) {
  EXPECT_EQ(refusal({{"buckets", {{{"first_stage", 1}, {"bytes", 8}}}}}),
            "chain: reduction: the last bucket starts at stage 1; expected 0, so every stage's gradients are summed");
  EXPECT_EQ(refusal({{"buckets", {{{"first_stage", 0}, {"bytes", 8}}, {{"first_stage", 1}, {"bytes", 8}}}}}),
            "chain: reduction bucket 1 comes after the bucket that starts at stage 0; expected that one last");
  EXPECT_EQ(refusal({{"buckets", {{{"first_stage", 0}, {"bytes", 8}}, {{"first_stage", 0}, {"bytes", 8}}}}}),
            "chain: reduction bucket 1 comes after the bucket that starts at stage 0; expected that one last");
  nlohmann::json j = two_stages();
  j["stages"].push_back(j["stages"][0]);
  j["reduction"] = {{"buckets", {{{"first_stage", 1}, {"bytes", 8}}, {{"first_stage", 2}, {"bytes", 8}}}}};
  EXPECT_THROW(chain_from_json(j, "chain"), Error) << "a bucket above the one before";
  EXPECT_EQ(refusal({{"buckets", {{{"first_stage", 5}, {"bytes", 8}}}}}),
            "chain: reduction bucket 0: field 'first_stage' is 5; expected a whole number in 0..1");
  EXPECT_EQ(refusal({{"buckets", nlohmann::json::array()}}),
            "chain: reduction: expected a non-empty 'buckets' array (the last stage's bucket first)");
}

}  // namespace
}  // namespace memtrain
