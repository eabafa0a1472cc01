#include "runtime/step/step_attempts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace memtrain::runtime {
namespace {

OutOfBudget refused(Bytes request) { return OutOfBudget("device memory", request, 100, 100); }

TEST(StepAttempts, RunsAgainAfterEachRecoveryAndReturnsTheAttemptsResult) {
  int attempts = 0;
  std::vector<Bytes> recovered;
  const int result = run_attempts(
      [&] {
        if (++attempts < 3) throw refused(attempts);
        return 7 * attempts;
      },
      [&](const OutOfBudget& why) { recovered.push_back(why.request()); });
  EXPECT_EQ(result, 21);
  EXPECT_EQ(recovered, (std::vector<Bytes>{1, 2}));
}

TEST(StepAttempts, ARecoveryThatThrowsEndsTheStep) {
  int attempts = 0;
  try {
    run_attempts([&] { ++attempts, throw refused(1); }, [](const OutOfBudget&) { throw Error("no schedule left"); });
    ADD_FAILURE() << "the step ended without an error";
  } catch (const OutOfBudget&) {
    ADD_FAILURE() << "the attempt's OutOfBudget escaped its recovery";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "no schedule left");
  }
  EXPECT_EQ(attempts, 1);
}

TEST(StepAttempts, AnErrorThatIsNotOutOfBudgetIsNotRetried) {
  int attempts = 0, recoveries = 0;
  EXPECT_THROW(
      run_attempts([&] { ++attempts, throw UsageError("a bad schedule"); }, [&](const OutOfBudget&) { ++recoveries; }),
      UsageError);
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(recoveries, 0);
}

TEST(StepAttempts, GivesUpAfterMaxRetriesNamingTheStepAndTheLastShortfall) {
  StepAttempts attempts;
  attempts.count_failure(2, "step 4", refused(1));
  attempts.count_failure(2, "step 4", refused(2));
  EXPECT_EQ(attempts.retries, 2);
  const OutOfBudget last = refused(3);
  try {
    attempts.count_failure(2, "step 4", last);
    ADD_FAILURE() << "a third failure with max_retries 2 went on";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("step 4 still ran out of budget after 2 stricter schedules: " + std::string(last.what())),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace memtrain::runtime
