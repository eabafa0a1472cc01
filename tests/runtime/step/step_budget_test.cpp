// One budget for every trainer: bytes, or N% of the largest input's step
// keeping everything, resolved once that step is measured.
#include "runtime/step/step_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace memtrain::runtime {
namespace {

TEST(StepBudget, BytesNeedNoReference) {
  StepBudget b({false, 0, 1000});
  EXPECT_TRUE(b.resolved());
  EXPECT_EQ(b.bytes(), 1000);
  EXPECT_EQ(b.reference(), 0);
}

TEST(StepBudget, AShareResolvesAgainstTheReferenceOnceKnown) {
  StepBudget b({true, 50, 0}, "give a sample");
  EXPECT_FALSE(b.resolved());
  try {
    b.bytes();
    FAIL() << "a share resolved with no reference";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("a budget of 50% is of the peak of a step of the largest input"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("give a sample"), std::string::npos) << e.what();
  }
  b.set_reference(1001);
  EXPECT_EQ(b.bytes(), 500);  // floored
  EXPECT_EQ(b.reference(), 1001);
}

TEST(StepBudget, RespecifyingKeepsTheReferenceAndRefusesAShareWithoutOne) {
  StepBudget bytes({false, 0, 1000});
  EXPECT_THROW(bytes.respecify({true, 30, 0}), UsageError);
  EXPECT_EQ(bytes.bytes(), 1000);  // unchanged by the refusal
  StepBudget share({true, 50, 0});
  share.set_reference(4000);
  share.respecify({true, 25, 0});
  EXPECT_EQ(share.bytes(), 1000);
  share.respecify({false, 0, 123});
  EXPECT_EQ(share.bytes(), 123);
}

TEST(StepBudget, AStepRunsUnderItsGrantAndPlansForItLessTheReserve) {
  StepBudget b({true, 50, 0});
  b.set_reference(4000);
  EXPECT_EQ(b.step_bytes(), 2000);  // no grant: the run's budget
  b.set_reserve(300);
  EXPECT_EQ(b.planning_bytes(), 1700);
  b.grant(1200);  // a lease's, for this step and the next until another
  EXPECT_EQ(b.bytes(), 2000);
  EXPECT_EQ(b.step_bytes(), 1200);
  EXPECT_EQ(b.planning_bytes(), 900);
  b.set_reference(6000);  // a grown reference moves the run's budget, not the grant
  EXPECT_EQ(b.bytes(), 3000);
  EXPECT_EQ(b.step_bytes(), 1200);
  b.respecify({false, 0, 5000});  // another budget ends the grant
  EXPECT_EQ(b.step_bytes(), 5000);
  EXPECT_EQ(b.planning_bytes(), 4700);
}

}  // namespace
}  // namespace memtrain::runtime
