#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/advisor.h"

namespace memtrain::predict {
namespace {

ThroughputModel model(double alpha, double beta, double a, double k, double c) {
  ThroughputModel m;
  m.alpha = alpha;
  m.beta = beta;
  m.a = a;
  m.k = k;
  m.c = c;
  m.min_batch = 4;
  m.max_batch = 64;
  return m;
}

AdvisorOptions device(Bytes bytes, double headroom = 0.0) {
  AdvisorOptions o;
  o.device_memory = bytes;
  o.headroom = headroom;
  return o;
}

TEST(Advisor, LargestBatchIsTheLastThatFitsTheUsableMemory) {
  // 100 MiB + 10 MiB per sample; 1000 MiB with 10% headroom leaves 900 MiB: batch 80.
  const Advice a = advise({{"none", model(10 * MiB, 100 * MiB, 0, 0.01, 0.1)}}, device(1000 * MiB, 0.10));
  EXPECT_EQ(a.usable_bytes, 900 * MiB);
  ASSERT_EQ(a.methods.size(), 1u);
  EXPECT_EQ(a.methods[0].max_batch, 80);
  EXPECT_DOUBLE_EQ(a.methods[0].predicted_peak_bytes, 900.0 * MiB);
  EXPECT_NEAR(a.methods[0].predicted_throughput, 80 / 0.9, 1e-9);
  EXPECT_EQ(a.recommended, "none");
  EXPECT_NE(a.reason.find("only method"), std::string::npos);
}

TEST(Advisor, CheckpointingWinsWhenTheDeviceIsUnderUsed) {
  // none fits 16, checkpoint 64; the device saturates only from batch 40.
  const ThroughputModel none = model(60 * MiB, 40 * MiB, 0.40, 0.01, 0.05);
  const ThroughputModel ckpt = model(15 * MiB, 40 * MiB, 0.52, 0.013, 0.05);
  const Advice a = advise({{"none", none}, {"checkpoint", ckpt}}, device(1000 * MiB));
  EXPECT_EQ(a.methods[0].max_batch, 16);
  EXPECT_EQ(a.methods[1].max_batch, 64);
  EXPECT_EQ(a.recommended, "checkpoint");
  EXPECT_NE(a.reason.find("grow 4.0x (16 -> 64)"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("over none, and none saturates the device from batch 40"), std::string::npos) << a.reason;
}

TEST(Advisor, CheckpointingLosesWhenTheDeviceIsAlreadySaturated) {
  // Saturated from batch 2: a bigger batch buys nothing, the recompute costs 30%.
  const ThroughputModel none = model(60 * MiB, 40 * MiB, 0.02, 0.01, 0.0);
  const ThroughputModel ckpt = model(15 * MiB, 40 * MiB, 0.026, 0.013, 0.0);
  const Advice a = advise({{"none", none}, {"checkpoint", ckpt}}, device(1000 * MiB));
  EXPECT_EQ(a.recommended, "none");
  EXPECT_NE(a.reason.find("checkpoint lets the batch grow 4.0x"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("but none saturates the device already at its smallest measured batch (4), so checkpoint "
                          "would cost 23% throughput"),
            std::string::npos)
      << a.reason;
}

TEST(Advisor, AMethodThatDoesNotFitIsReportedNotRecommended) {
  const Advice a =
      advise({{"none", model(60 * MiB, 900 * MiB, 0, 0.01, 0)}, {"checkpoint", model(1 * MiB, 500 * MiB, 0, 0.02, 0)}},
             device(800 * MiB));
  EXPECT_EQ(a.methods[0].max_batch, 0);
  EXPECT_NE(a.methods[0].note.find("does not fit even batch 1"), std::string::npos);
  EXPECT_EQ(a.methods[1].max_batch, 300);
  EXPECT_EQ(a.recommended, "checkpoint");
  EXPECT_NE(a.reason.find("none does not fit even batch 1"), std::string::npos) << a.reason;

  const Advice nothing = advise({{"none", model(60 * MiB, 900 * MiB, 0, 0.01, 0)}}, device(800 * MiB));
  EXPECT_TRUE(nothing.recommended.empty());
  EXPECT_NE(nothing.reason.find("no method fits"), std::string::npos);
}

TEST(Advisor, TheBestBatchIsTheKneeWhenThroughputFallsBeyondIt) {
  // c < 0: past the knee at batch 20 each sample costs more than the last.
  const ThroughputModel m = model(1 * MiB, 10 * MiB, 0.4, 0.02, -0.1);
  const Advice a = advise({{"none", m}}, device(1000 * MiB));
  EXPECT_EQ(a.methods[0].max_batch, 990);
  EXPECT_EQ(a.methods[0].best_batch, 20);
  EXPECT_NEAR(a.methods[0].predicted_throughput, 20 / 0.3, 1e-9);
  EXPECT_NE(a.methods[0].note.find("throughput falls beyond batch 20"), std::string::npos) << a.methods[0].note;
  // c > 0: the largest batch is the best.
  const Advice b = advise({{"none", model(1 * MiB, 10 * MiB, 0.4, 0.02, 0.1)}}, device(1000 * MiB));
  EXPECT_EQ(b.methods[0].best_batch, 990);
}

TEST(Advisor, RejectsBadDeviceSettings) {
  const std::vector<std::pair<std::string, ThroughputModel>> one = {{"none", model(1, 1, 0, 1, 0)}};
  EXPECT_THROW(advise(one, device(0)), UsageError);
  EXPECT_THROW(advise(one, device(1 * GiB, 1.0)), UsageError);
  EXPECT_THROW(advise(one, device(1 * GiB, -0.1)), UsageError);
  EXPECT_THROW(advise({}, device(1 * GiB)), Error);
}

TEST(Advisor, FitsEachMethodOfAMeasurementTable) {
  std::vector<Measurement> rows;
  for (std::int64_t b : {4, 8, 16, 32}) {
    rows.push_back({"none", b, 100 * MiB + b * 10 * MiB, 0.1 + 0.01 * b});
    rows.push_back({"checkpoint", b, 100 * MiB + b * 2 * MiB, 0.1 + 0.011 * b});
  }
  const Advice a = advise_from_measurements(rows, device(500 * MiB, 0));
  ASSERT_EQ(a.methods.size(), 2u);
  EXPECT_EQ(a.methods[0].method, "none");
  EXPECT_EQ(a.methods[0].max_batch, 40);
  EXPECT_EQ(a.methods[1].max_batch, 200);
  EXPECT_EQ(a.recommended, "checkpoint");
  rows.pop_back();
  rows.pop_back();
  rows.pop_back();
  EXPECT_THROW(advise_from_measurements(rows, device(500 * MiB, 0)), Error);  // checkpoint has 2 points
}

}  // namespace
}  // namespace memtrain::predict
