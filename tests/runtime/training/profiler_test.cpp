#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/throughput_model.h"
#include "runtime/input/brown_batches.h"
#include "runtime/training/profiler.h"
#include "support/tiny_tagging.h"

namespace memtrain::runtime {
namespace {

using testing::tiny_shape;
using testing::tiny_tagger;
using testing::tiny_tagging;

struct TinyProfile {
  std::shared_ptr<data::TaggingDataset> data = tiny_tagging();
  ProfilePoint run(const ProfileMethod& method, std::int64_t batch) {
    ProfileOptions o;
    o.timed_steps = 3;
    return profile_batch(
        method, batch, [&] { return tiny_tagger(tiny_shape(*data), 0.1); },
        [&](std::int64_t b) { return std::make_unique<BrownBatches>(data, b, 3); }, o);
  }
};

TEST(Profiler, MeasuresPeakAndMedianTimeAtTheLargestInput) {
  TinyProfile t;
  const ProfilePoint p = t.run(parse_profile_method("none", "all", std::nullopt), 8);
  EXPECT_EQ(p.measurement.method, "none");
  EXPECT_EQ(p.measurement.batch, 8);
  EXPECT_GT(p.measurement.peak_bytes, 0);
  ASSERT_EQ(p.timed_seconds.size(), 3u);
  std::vector<Seconds> s = p.timed_seconds;
  std::sort(s.begin(), s.end());
  EXPECT_EQ(p.measurement.step_seconds, s[1]);
  EXPECT_EQ(p.signature.rfind("8x", 0), 0u) << p.signature;
}

TEST(Profiler, CheckpointingPeaksLowerAndMemoryIsLinearInTheBatch) {
  TinyProfile t;
  std::vector<predict::Measurement> none, ckpt;
  for (std::int64_t b : {4, 8, 12, 16}) {
    none.push_back(t.run(parse_profile_method("none", "all", std::nullopt), b).measurement);
    ckpt.push_back(t.run(parse_profile_method("checkpoint:optimal", "all", std::nullopt), b).measurement);
    EXPECT_LT(ckpt.back().peak_bytes, none.back().peak_bytes) << b;
    if (none.size() > 1) {
      EXPECT_GT(none.back().peak_bytes, none[none.size() - 2].peak_bytes);
    }
  }
  const predict::ThroughputModel mn = predict::fit_throughput_model(none), mc = predict::fit_throughput_model(ckpt);
  EXPECT_GT(mn.r2_memory, 0.99);
  EXPECT_GT(mc.r2_memory, 0.95);
  EXPECT_LT(mc.alpha, mn.alpha) << "checkpointing grows slower per sample";
}

TEST(Profiler, ABudgetGivenIsPlannedAgainst) {
  TinyProfile t;
  const ProfilePoint full = t.run(parse_profile_method("none", "all", std::nullopt), 8);
  const ProfilePoint half =
      t.run(parse_profile_method("checkpoint:optimal", "all", parse_budget("60%", "--budget")), 8);
  EXPECT_LE(half.measurement.peak_bytes, half.budget_bytes);
  EXPECT_LE(half.budget_bytes, full.measurement.peak_bytes * 61 / 100);
}

TEST(Profiler, MethodNamesAreCheckedAndUnbuiltOnesExplained) {
  EXPECT_EQ(parse_profile_method("checkpoint", "sqrt", std::nullopt).planner, "sqrt");
  EXPECT_EQ(parse_profile_method("checkpoint:mimose", "sqrt", std::nullopt).planner, "mimose");
  EXPECT_THROW(parse_profile_method("checkpoint:nope", "all", std::nullopt), UsageError);
  EXPECT_THROW(parse_profile_method("checkpoint:none", "all", std::nullopt), UsageError);
  EXPECT_THROW(parse_profile_method("swap", "all", std::nullopt), UsageError);
  ASSERT_TRUE(unbuilt_method("offload").has_value());
  EXPECT_NE(unbuilt_method("compress")->find("not built yet"), std::string::npos);
  EXPECT_FALSE(unbuilt_method("none").has_value());
}

}  // namespace
}  // namespace memtrain::runtime
