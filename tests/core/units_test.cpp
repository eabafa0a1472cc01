#include <gtest/gtest.h>

#include "core/error.h"
#include "core/units.h"

namespace memtrain {
namespace {

TEST(ParseBytes, AcceptsPlainBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("4096", "--x"), 4096);
  EXPECT_EQ(parse_bytes("64KiB", "--x"), 64 * 1024);
  EXPECT_EQ(parse_bytes("1.5 MiB", "--x"), 3 * 512 * 1024);
  EXPECT_EQ(parse_bytes("2GiB", "--x"), 2LL * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("512M", "--x"), 512LL * 1024 * 1024);
  EXPECT_EQ(parse_bytes("  80MB ", "--x"), 80LL * 1000 * 1000);
  EXPECT_EQ(parse_bytes("1 GB", "--x"), 1000LL * 1000 * 1000);
  EXPECT_EQ(parse_bytes("2kB", "--x"), 2000);
}

TEST(ParseBytes, RefusesFractionsOfAByte) {
  for (const char* bad : {"1.5", "0.3KiB", "1.0000001MiB"}) {
    try {
      parse_bytes(bad, "--budget");
      FAIL() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("whole number"), std::string::npos) << e.what();
    }
  }
}

TEST(ParseBytes, RejectsWithTheFlagAndTheValue) {
  for (const char* bad : {"", "abc", "12 parsecs", "-5", "0", "1e9", "0x10", "1.2.3MiB"}) {
    try {
      parse_bytes(bad, "--budget");
      FAIL() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--budget"), std::string::npos) << e.what();
    }
  }
}

TEST(FormatBytes, PicksAReadableUnit) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3 * MiB), "3.0 MiB");
  EXPECT_EQ(format_bytes(5 * GiB / 2), "2.50 GiB");
}

TEST(FormatBytes, BesideAFigureThatRendersTheSameShowsTheBytes) {
  // A need and a budget a few bytes apart: "27.6 MiB above 27.6 MiB" says nothing.
  const Bytes need = 28934144, budget = need - 3000;
  EXPECT_EQ(format_bytes_beside(need, budget), "27.6 MiB (28934144 bytes)");
  EXPECT_EQ(format_bytes_beside(budget, need), "27.6 MiB (28931144 bytes)");
  EXPECT_EQ(format_bytes_beside(need, need), "27.6 MiB");
  EXPECT_EQ(format_bytes_beside(need, 2 * need), "27.6 MiB");
}

TEST(ParseBudget, PercentOrBytes) {
  const BudgetSpec p = parse_budget("50%", "--budget");
  EXPECT_TRUE(p.is_percent);
  EXPECT_EQ(p.resolve(1000), 500);
  const BudgetSpec b = parse_budget("1MiB", "--budget");
  EXPECT_FALSE(b.is_percent);
  EXPECT_EQ(b.resolve(12345), MiB);
  EXPECT_EQ(parse_budget("12.5%", "--budget").resolve(800), 100);
}

TEST(ParseBudget, RejectsPercentagesOutsideZeroToHundred) {
  for (const char* bad : {"0%", "101%", "%", "-3%", "5 MiB%"}) {
    EXPECT_THROW(parse_budget(bad, "--budget"), UsageError) << bad;
  }
}

TEST(ParseBudget, TextThatIsNeitherNamesBothForms) {
  try {
    parse_budget("90 percent", "budget");
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("budget '90 percent'"), std::string::npos) << what;
    EXPECT_NE(what.find("MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("or N% with 0 < N <= 100"), std::string::npos) << what;
  }
}

TEST(OutOfBudget, NamesRequestLiveAndBudget) {
  const OutOfBudget e("device", 100, 900, 950);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("100 bytes"), std::string::npos);
  EXPECT_NE(msg.find("900 bytes live"), std::string::npos);
  EXPECT_NE(msg.find("950 bytes"), std::string::npos);
  EXPECT_EQ(e.request(), 100);
  EXPECT_EQ(e.live(), 900);
  EXPECT_EQ(e.budget(), 950);
}

}  // namespace
}  // namespace memtrain
