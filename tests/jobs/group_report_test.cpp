// A launch's report as the jobs layer gives it: each job's figures from the
// launch and its own run's report, the group's summary.
#include "jobs/group_report.h"

#include <gtest/gtest.h>

namespace memtrain::jobs {
namespace {

JobRunReport::Step step(bool collection, double peak, double plain_peak, double plain_s, double schedule_s) {
  JobRunReport::Step s;
  s.collection = collection;
  s.samples = 4;
  s.peak_bytes = peak;
  s.predicted_plain_peak_bytes = plain_peak;
  s.predicted_plain_seconds = plain_s;
  s.predicted_schedule_seconds = schedule_s;
  return s;
}

struct Launch {
  LaunchOptions options;
  LaunchResult result;

  Launch() {
    options.group.policy = Policy::Arbiter;
    options.group.name = "g";
    options.jobs = {JobSpec{{"--model", "gpt"}}, JobSpec{{"--model", "resnet"}}};
    result.group.budget = 1000;
    result.group.max_live = 900;
    result.makespan = 10;
    for (std::int32_t pid : {11, 12}) {
      MemberState m;
      m.pid = pid;
      m.status = MemberState::Finished;
      m.steps = 3;
      result.group.members.push_back(m);
      JobOutcome out;
      out.pid = pid;
      out.launched = true;
      out.exit_code = 0;
      out.started = 0;
      out.ended = 4;
      out.report_path = "job-" + std::to_string(pid);
      result.jobs.push_back(out);
    }
    // Job 11 ran a collection step and two planned ones at 60% of the
    // plain peak, 1.2x its time; job 12 wrote no report.
    options.read_report = [](const std::string& path) -> std::optional<JobRunReport> {
      if (path != "job-11") return std::nullopt;
      JobRunReport r;
      r.threads = 1;
      r.retries = 2;
      r.violations = 1;
      r.steps = {step(true, 900, 1000, 1, 3), step(false, 600, 1000, 1, 1.2), step(false, 500, 1000, 1, 1.2)};
      return r;
    };
  }
};

TEST(GroupReport, EachJobsFiguresComeFromItsOwnReportAndTheLaunch) {
  const Launch l;
  const GroupReport g = group_report(l.options, l.result);
  ASSERT_EQ(g.jobs.size(), 2u);
  const JobFigures& first = g.jobs[0];
  EXPECT_EQ(first.index, 1u);
  EXPECT_TRUE(first.completed);
  EXPECT_EQ(first.seconds.value_or(-1), 4);
  EXPECT_EQ(first.threads.value_or(-1), 1);
  EXPECT_EQ(first.retries.value_or(-1), 2);
  EXPECT_DOUBLE_EQ(first.samples_per_second.value_or(-1), 12.0 / 4);
  // Memory saved on the planned steps: 1 - 600 / 1000; time over keeping everything: 2.4 / 2 - 1.
  EXPECT_DOUBLE_EQ(first.msr.value_or(-1), 0.4);
  EXPECT_NEAR(first.eor.value_or(-1), 0.2, 1e-12);
  EXPECT_NEAR(first.cbr.value_or(-1), 2.0, 1e-9);
  EXPECT_EQ(first.args.value_or(std::vector<std::string>{}), (std::vector<std::string>{"--model", "gpt"}));
  // No report: nothing read from one, the launch's figures still there.
  const JobFigures& second = g.jobs[1];
  EXPECT_TRUE(second.completed);
  EXPECT_FALSE(second.retries.has_value());
  EXPECT_FALSE(second.msr.has_value());
  EXPECT_EQ(second.member->steps, 3);
  // The group: the job's own violation counts; one completed job priced: Jain's index of one is 1.
  EXPECT_EQ(g.violations, 1);
  EXPECT_EQ(g.policy, Policy::Arbiter);
  EXPECT_DOUBLE_EQ(g.jain_index.value_or(-1), 1.0);
}

TEST(GroupReport, AGroupOverItsBudgetAndAFailedJobAreCounted) {
  Launch l;
  l.result.group.max_live = 1200;  // above the budget of 1000
  l.result.jobs[1].exit_code = 1;
  l.result.jobs[1].error = "out of memory";
  const GroupReport g = group_report(l.options, l.result);
  EXPECT_EQ(g.violations, 2);  // the group's, and job 11's own
  EXPECT_FALSE(g.jobs[1].completed);
  EXPECT_EQ(g.jobs[1].outcome.error, "out of memory");
}

}  // namespace
}  // namespace memtrain::jobs
