#include "group_sim/group_simulator.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/chain_json.h"
#include "core/error.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/chains.h"
#include "support/temp_dir.h"

namespace memtrain::group_sim {
namespace {

using jobs::Policy;

SimJob job_of(const Chain& c, std::int64_t steps, std::string label = "job") {
  SimJob j;
  j.label = std::move(label);
  j.chain = c;
  j.steps = steps;
  return j;
}

Seconds plain_time(const Chain& c) { return sim::simulate(c, plan::schedule_keeping_everything(c.size())).time; }

BudgetSpec percent(double p) {
  BudgetSpec b;
  b.is_percent = true;
  b.percent = p;
  return b;
}

TEST(GroupSimulator, OneJobWithRoomTakesItsStepsOneAfterAnother) {
  const Chain c = testing::random_chain(8, 3);
  GroupSpec spec;
  spec.jobs = {job_of(c, 5)};
  spec.jobs[0].overhead = 0.5;
  const GroupOutcome g = simulate_group(spec, Policy::Fcfs, percent(100));
  ASSERT_TRUE(g.refused.empty()) << g.refused;
  ASSERT_TRUE(g.jobs[0].completed);
  EXPECT_EQ(g.jobs[0].steps, 5);
  EXPECT_NEAR(g.makespan, 5 * (plain_time(c) + 0.5), 1e-9);
  EXPECT_NEAR(g.jobs[0].eor, 0, 1e-12);
  EXPECT_EQ(g.violations, 0);
}

TEST(GroupSimulator, ComputeIsTimeSlicedAmongTheJobsOrRunsSideBySideOnSeveralSlots) {
  const Chain c = testing::random_chain(6, 11);
  GroupSpec spec;
  spec.jobs = {job_of(c, 4, "a"), job_of(c, 4, "b")};
  const Seconds one = 4 * plain_time(c);
  EXPECT_NEAR(simulate_group(spec, Policy::Fcfs, percent(100)).makespan, 2 * one, 1e-9);
  spec.device.compute_slots = 2;
  EXPECT_NEAR(simulate_group(spec, Policy::Fcfs, percent(100)).makespan, one, 1e-9);
  spec.device.contention = 0.25;  // each of two side by side runs 1.25x slower
  EXPECT_NEAR(simulate_group(spec, Policy::Fcfs, percent(100)).makespan, 1.25 * one, 1e-9);
}

TEST(GroupSimulator, AJobStartingLaterBeginsThen) {
  const Chain c = testing::random_chain(6, 12);
  GroupSpec spec;
  spec.jobs = {job_of(c, 2, "a"), job_of(c, 2, "b")};
  spec.device.compute_slots = 2;
  spec.jobs[1].start = 100;
  const GroupOutcome g = simulate_group(spec, Policy::Arbiter, percent(100));
  EXPECT_NEAR(g.jobs[1].start, 100, 1e-9);
  EXPECT_NEAR(g.makespan, 100 + 2 * plain_time(c), 1e-9);
}

// Every policy, budgets from tight to ample, mixed chains and input sizes:
// the leases and what the others hold never pass the budget, and every
// planned step fits its lease.
TEST(GroupSimulator, NoPolicyEverPassesTheBudget) {
  GroupSpec spec;
  for (int k = 0; k < 4; ++k) {
    SimJob j = job_of(testing::with_link(testing::random_chain(5 + 3 * k, 20 + k), 1e9), 6, "j" + std::to_string(k));
    j.sizes = {1.0, 0.4, 0.7};
    spec.jobs.push_back(j);
  }
  int completed = 0;
  for (Policy p : {Policy::Static, Policy::Proportional, Policy::Fcfs, Policy::Tensile, Policy::Arbiter}) {
    for (double b : {50.0, 70.0, 100.0}) {
      const GroupOutcome g = simulate_group(spec, p, percent(b));
      if (!g.refused.empty()) continue;
      EXPECT_EQ(g.violations, 0) << jobs::policy_name(p) << " " << b;
      EXPECT_LE(g.max_total_live, g.budget) << jobs::policy_name(p) << " " << b;
      for (const SimJobOutcome& j : g.jobs) {
        EXPECT_TRUE(j.completed) << jobs::policy_name(p) << " " << b << " " << j.label << ": " << j.error;
        EXPECT_GE(j.eor, -1e-9);
        completed += j.completed;
      }
      EXPECT_GT(g.jain, 0);
      EXPECT_LE(g.jain, 1 + 1e-12);
    }
  }
  EXPECT_GE(completed, 4 * 8) << "most runs are feasible";
}

TEST(GroupSimulator, TensileReplansAJobWhenItsInputDriftsAndOnlyThen) {
  GroupSpec spec;
  SimJob drifting = job_of(testing::with_link(testing::random_chain(8, 31), 1e9), 6, "drifting");
  drifting.sizes = {1.0, 0.1};  // a tenth of the largest input, then the largest again, ...
  const SimJob steady = job_of(testing::with_link(testing::random_chain(8, 32), 1e9), 6, "steady");
  spec.jobs = {drifting, steady};
  const GroupOutcome g = simulate_group(spec, Policy::Tensile, percent(70));
  ASSERT_TRUE(g.refused.empty()) << g.refused;
  EXPECT_EQ(g.violations, 0);
  // Planned first for its largest input: every step of the small input
  // drifts from the plan, and so does every return to the largest.
  EXPECT_GE(g.jobs[0].tensile_replans, 2);
  EXPECT_EQ(g.jobs[1].tensile_replans, 0) << "its input never drifts";
  EXPECT_EQ(simulate_group(spec, Policy::Arbiter, percent(70)).jobs[0].tensile_replans, 0) << "tensile's alone";
}

// On a time-sliced device the arbiter weighs waiting (free while others
// compute) against recomputation (device time): it is never slower than
// the best other policy by more than 1%.
TEST(GroupSimulator, OnATimeSlicedDeviceTheArbiterIsAsFastAsTheBestOtherPolicy) {
  GroupSpec spec;
  for (int k = 0; k < 4; ++k) {
    SimJob j = job_of(testing::with_link(testing::random_chain(5 + 2 * k, 40 + k), 1e9), 8, "j" + std::to_string(k));
    j.sizes = {1.0, 0.5, 0.8, 0.3};
    spec.jobs.push_back(j);
  }
  spec.device.compute_slots = 1;
  int compared = 0;
  for (double b : {60.0, 75.0, 90.0, 100.0}) {
    const GroupOutcome arbiter = simulate_group(spec, Policy::Arbiter, percent(b));
    if (!arbiter.refused.empty()) continue;
    for (Policy p : {Policy::Static, Policy::Proportional, Policy::Fcfs, Policy::Tensile}) {
      const GroupOutcome g = simulate_group(spec, p, percent(b));
      if (!g.refused.empty()) continue;
      EXPECT_LE(arbiter.makespan, 1.01 * g.makespan) << jobs::policy_name(p) << " at " << b << "%";
      ++compared;
    }
  }
  EXPECT_GE(compared, 6);
}

TEST(GroupSimulator, ABudgetBelowTheJobsLeastNamesEachJob) {
  GroupSpec spec;
  spec.jobs = {job_of(testing::random_chain(6, 1), 2, "first"), job_of(testing::random_chain(6, 2), 2, "second")};
  BudgetSpec tiny;
  tiny.bytes = 10;
  const GroupOutcome g = simulate_group(spec, Policy::Fcfs, tiny);
  EXPECT_NE(g.refused.find("job 1 (first) needs at least"), std::string::npos) << g.refused;
  EXPECT_NE(g.refused.find("job 2 (second) needs at least"), std::string::npos) << g.refused;
}

TEST(GroupSimulator, AJobsFileNamesWhatIsWrong) {
  testing::TempDir dir;
  write_chain_file(testing::random_chain(4, 5), dir.path() + "/c.json");
  auto error_of = [&](const std::string& text) {
    std::ofstream(dir.path() + "/jobs.json") << text;
    try {
      read_group_file(dir.path() + "/jobs.json");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of(R"({"jobs": [{"chain": "c.json", "steps": 3, "sizes": [0.5, 1]}]})"), "");
  EXPECT_NE(error_of(R"({"jobs": []})").find("non-empty array of jobs"), std::string::npos);
  EXPECT_NE(error_of(R"({"jobs": [{"steps": 3}]})").find("job 1: missing field 'chain'"), std::string::npos);
  EXPECT_NE(
      error_of(R"({"jobs": [{"chain": "c.json", "steps": 3, "sizes": [1.5]}]})").find("expected fractions in (0, 1]"),
      std::string::npos);
  EXPECT_NE(
      error_of(R"({"jobs": [{"chain": "c.json", "steps": 3, "planner": "rotor"}]})").find("unknown planner 'rotor'"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"jobs": [{"chain": "c.json", "step": 3}]})").find("unknown field 'step'"), std::string::npos);
  EXPECT_NE(
      error_of(R"({"device": {"compute_slots": 0.5}, "jobs": [{"chain": "c.json", "steps": 1}]})").find("at least 1"),
      std::string::npos);
}

}  // namespace
}  // namespace memtrain::group_sim
