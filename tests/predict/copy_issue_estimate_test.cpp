#include <gtest/gtest.h>

#include "predict/copy_issue_estimate.h"

namespace memtrain::predict {
namespace {

TEST(CopyIssueEstimate, IsTheMedianOverTheCopiesOfRecentSteps) {
  CopyIssueEstimate issue;
  EXPECT_EQ(issue.seconds(), 0) << "nothing started yet";
  issue.observe({3e-5, 1e-3, 2e-5});  // one slow start does not move the median
  EXPECT_DOUBLE_EQ(issue.seconds(), 3e-5);
  issue.observe({});  // a step that copied nothing
  EXPECT_DOUBLE_EQ(issue.seconds(), 3e-5);
  issue.observe({1e-5});  // four copies over both steps: the mean of the middle two
  EXPECT_DOUBLE_EQ(issue.seconds(), (2e-5 + 3e-5) / 2);
}

TEST(CopyIssueEstimate, ForgetsStepsOlderThanItsWindow) {
  CopyIssueEstimate issue;
  for (int k = 0; k < CopyIssueEstimate::kWindow; ++k) issue.observe({1e-4, 1e-4});
  for (int k = 0; k < CopyIssueEstimate::kWindow / 2 + 1; ++k) issue.observe({1e-5, 1e-5});
  EXPECT_DOUBLE_EQ(issue.seconds(), 1e-5) << "the faster steps are now the majority";
}

}  // namespace
}  // namespace memtrain::predict
