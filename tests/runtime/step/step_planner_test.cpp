// The step planner both front ends plan through: what a step runs, and the
// retry ladder after a step ran out of budget (a stricter plan that becomes
// the size's cached plan, the least schedules for the size and for the
// largest input, then every stage checkpointed, then an error).
#include "runtime/step/step_planner.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "runtime/execution/chain_measurement.h"
#include "sim/simulator.h"
#include "support/rig.h"

namespace memtrain::runtime {
namespace {

// A StepPlanner for the rig's model that has measured its largest batch once.
struct Measured {
  testing::Rig rig{0.0};
  Batch batch = rig.batch();
  std::int64_t size = batch.signature.size;
  StepPlanner steps;
  Bytes budget = 0;

  explicit Measured(StepPlannerOptions options)
      : steps(std::move(options), *rig.model, stage_constants(*rig.model, 0)) {
    const ExecutionResult r = rig.run(steps.collection_schedule(0), batch);
    steps.observe_sample(batch.signature, sample_execution(r, rig.model->size(), 0));
    steps.note_size(size);
    // Half of what keeping everything needs: plans must recompute.
    const Chain chain = steps.predicted_chain(size);
    budget = plan::keep_everything_peak(chain) / 2;
    steps.use_budget(budget);
  }
};

// What the device memory throws when a step asks for more than its budget.
OutOfBudget ran_out(Bytes live, Bytes request = 1 << 20) { return OutOfBudget("device memory", request, live, live); }

StepPlannerOptions optimal() {
  StepPlannerOptions o;
  o.planner = "optimal";
  return o;
}

TEST(StepPlanner, CollectsFirstThenPlansAndCachesPerSize) {
  Measured m(optimal());
  EXPECT_EQ(m.steps.choose(m.size, 0).kind, PlanKind::Collect);
  EXPECT_EQ(m.steps.choose(m.size, 3).kind, PlanKind::Collect);
  const StepChoice made = m.steps.choose(m.size, 4);
  EXPECT_EQ(made.kind, PlanKind::New);
  const StepChoice hit = m.steps.choose(m.size, 5);
  EXPECT_EQ(hit.kind, PlanKind::Cached);
  EXPECT_EQ(hit.schedule, made.schedule);
}

// What the caller's forward saves before block 0 grows with the input, and a
// step observes it before it is planned: a chain for a size counts the most
// seen at that size or below, not the most seen at a larger one.
TEST(StepPlanner, CountsTheResidentBytesSeenAtTheSizeOrBelow) {
  Measured m(optimal());
  const Bytes fixed = m.steps.predicted_chain(m.size).persistent_bytes();
  m.steps.observe_resident(fixed + 50'000, 0, 1000);
  m.steps.observe_resident(fixed + 20'000, 0, 500);
  EXPECT_EQ(m.steps.predicted_chain(500).resident_bytes, 20'000);
  EXPECT_EQ(m.steps.predicted_chain(700).resident_bytes, 20'000);
  EXPECT_EQ(m.steps.predicted_chain(1000).resident_bytes, 50'000);
  EXPECT_EQ(m.steps.predicted_chain(4000).resident_bytes, 50'000);
  EXPECT_EQ(m.steps.predicted_chain(100).resident_bytes, 20'000) << "below every size seen: the smallest's";
  // A workspace that appeared later, seen at a small size, counts at every larger one.
  m.steps.observe_resident(fixed + 70'000, 0, 400);
  EXPECT_EQ(m.steps.predicted_chain(1000).resident_bytes, 70'000);
  EXPECT_EQ(m.steps.resident_bytes(), 70'000);
}

TEST(StepPlanner, ARetryRunsAStricterScheduleThatBecomesTheSizesPlan) {
  Measured m(optimal());
  StepChoice choice = m.steps.choose(m.size, 4);
  const Schedule everything_checkpointed = m.steps.fallback_schedule();
  StepAttempts attempts;
  std::vector<Schedule> ran{choice.schedule};
  // Each rung is a schedule the step has not run out with yet, and the next
  // step of this size runs it from the cache.
  for (int rung = 1; rung <= 8; ++rung) {
    try {
      choice =
          m.steps.retry(m.size, choice, attempts, "step 5: input " + m.batch.signature.describe(), ran_out(m.budget));
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("step 5: input " + m.batch.signature.describe() +
                                           " does not fit the budget even with the most frugal schedule"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::find(ran.begin(), ran.end(), everything_checkpointed), ran.end())
          << "every stage checkpointed is the last rung";
      return;
    }
    EXPECT_EQ(choice.kind, PlanKind::Retry);
    EXPECT_EQ(attempts.retries, rung);
    EXPECT_EQ(std::find(ran.begin(), ran.end(), choice.schedule), ran.end())
        << "rung " << rung << " repeats a schedule";
    ran.push_back(choice.schedule);
    const StepChoice next = m.steps.choose(m.size, 5 + rung);
    EXPECT_EQ(next.kind, PlanKind::Cached) << "rung " << rung;
    EXPECT_EQ(next.schedule, choice.schedule) << "rung " << rung;
  }
  ADD_FAILURE() << "the ladder never ended";
}

TEST(StepPlanner, RetriesEndAfterMaxRetries) {
  StepPlannerOptions o = optimal();
  o.max_retries = 1;
  Measured m(o);
  StepChoice choice = m.steps.choose(m.size, 4);
  StepAttempts attempts;
  choice = m.steps.retry(m.size, choice, attempts, "step 5", ran_out(m.budget));
  const OutOfBudget again = ran_out(m.budget);
  try {
    m.steps.retry(m.size, choice, attempts, "step 5", again);
    ADD_FAILURE() << "a second retry with max_retries 1";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("step 5 still ran out of budget after 1 stricter schedules: " + std::string(again.what())) !=
                    std::string::npos ||
                what.find("does not fit the budget even with the most frugal schedule") != std::string::npos)
        << what;
  }
}

// A step that peaked above its prediction makes the plans of new sizes
// count that much more activation memory; one below it changes nothing,
// and the factor has a ceiling.
TEST(StepPlanner, PlansNewSizesForTheShortfallStepsShowed) {
  Measured m(optimal());
  const Chain before = m.steps.planning_chain(m.size);
  const Bytes fixed = before.persistent_bytes();
  const Bytes predicted = fixed + 1000000;
  m.steps.observe_peak(m.size, predicted, predicted - 5000);
  EXPECT_EQ(m.steps.learned_shortfall(), 1.0);
  m.steps.observe_peak(m.size, predicted, predicted + 100000);  // 10% more activation memory
  EXPECT_DOUBLE_EQ(m.steps.learned_shortfall(), 1.1);
  const Chain after = m.steps.planning_chain(m.size);
  for (int i = 0; i < before.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(after.stages[i].saved_bytes), 1.1 * before.stages[i].saved_bytes, 1.0) << i;
  }
  EXPECT_EQ(after.persistent_bytes(), fixed);
  m.steps.observe_peak(m.size, predicted, predicted + 900000);
  EXPECT_DOUBLE_EQ(m.steps.learned_shortfall(), StepPlanner::kMaxShortfall);
}

// An attempt that ran out of budget needed at least what was live plus what
// it asked for: a planned one teaches the shortfall before its retry is
// planned; a collection step, planned by no prediction, teaches nothing.
TEST(StepPlanner, AnAttemptThatRanOutTeachesTheShortfallBeforeItsRetryIsPlanned) {
  Measured m(optimal());
  StepAttempts attempts;
  const StepChoice collecting = m.steps.choose(m.size, 0);
  m.steps.retry(m.size, collecting, attempts, "step 1", ran_out(m.budget * 4));
  EXPECT_EQ(m.steps.learned_shortfall(), 1.0);

  const Chain before = m.steps.planning_chain(m.size);
  const StepChoice planned = m.steps.choose(m.size, 4);
  const Chain chain = m.steps.predicted_chain(m.size);
  const Bytes fixed = chain.persistent_bytes();
  const Bytes predicted = sim::simulate(chain, planned.schedule).peak_bytes;
  ASSERT_GT(predicted, fixed);
  // It reached 8% more activation memory than predicted, and was still going.
  const Bytes reached = fixed + (predicted - fixed) * 108 / 100;
  StepAttempts again;
  const StepChoice next = m.steps.retry(m.size, planned, again, "step 5", ran_out(reached - 4096, 4096));
  EXPECT_NEAR(m.steps.learned_shortfall(), 1.08, 1e-6);
  const Chain after = m.steps.planning_chain(m.size);
  EXPECT_NEAR(static_cast<double>(after.stages[0].saved_bytes), 1.08 * before.stages[0].saved_bytes, 1.0);
  EXPECT_NE(next.schedule, planned.schedule);
}

// A size's prediction can be short where the largest input's measured chain
// is not: once the plan and the least schedule for the size both ran out,
// the step runs the planner's least schedule for the largest input, and
// only then every stage checkpointed.
TEST(StepPlanner, AfterTheSizesLeastTheLadderRunsTheLeastForTheLargestInput) {
  Measured m(optimal());
  // The largest input's chain, as measured: one activation in the middle so
  // large that its least schedule recomputes it rather than keep it.
  Chain largest = m.steps.predicted_chain(m.size);
  const int mid = largest.size() / 2;
  largest.stages[mid].input_bytes *= 40;
  m.steps.pin_largest(largest);
  m.steps.use_budget(largest.persistent_bytes() + 1);  // no plan fits: each rung comes from the ladder

  const Schedule at_size = m.steps.most_frugal(m.size), at_largest = m.steps.most_frugal_at_largest(),
                 fallback = m.steps.fallback_schedule();
  ASSERT_NE(at_largest, at_size);
  ASSERT_NE(at_largest, fallback);
  StepAttempts attempts;
  StepChoice choice{at_size, PlanKind::New, 0};
  choice = m.steps.retry(m.size, choice, attempts, "step 5", ran_out(m.budget));
  EXPECT_EQ(choice.schedule, at_largest);
  EXPECT_EQ(m.steps.choose(m.size, 6).schedule, at_largest) << "the size's cached plan";
  choice = m.steps.retry(m.size, choice, attempts, "step 5", ran_out(m.budget));
  EXPECT_EQ(choice.schedule, fallback);
  try {
    m.steps.retry(m.size, choice, attempts, "step 5", ran_out(m.budget));
    ADD_FAILURE() << "a ladder with every rung run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("least for this input and for the largest, or every stage checkpointed"),
              std::string::npos)
        << e.what();
  }
}

TEST(StepPlanner, OptionsOutOfRangeAreRefusedByName) {
  StepPlannerOptions o;
  o.collect_steps = kMaxCollectSteps + 1;
  EXPECT_THROW(check_step_planner_options(o), UsageError);
  o = {};
  o.margin = -1;
  try {
    check_step_planner_options(o);
    ADD_FAILURE() << "a negative margin";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("prediction margin (margin)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::runtime
