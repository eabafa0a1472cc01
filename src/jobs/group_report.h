// What a launch of a job group comes to (`memtrain jobs`, docs/jobs.md): the
// group's summary and each job's figures, from the launch and the jobs' own
// reports. The front end writes it out (the CLI as JSON) and prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "jobs/job_group.h"
#include "jobs/launcher.h"
#include "jobs/lease_policy.h"

namespace memtrain::jobs {

struct JobFigures {
  std::size_t index = 0;  // 1-based: --job order, then jobs that joined by hand
  JobOutcome outcome;
  std::optional<MemberState> member;             // none: it never joined the group
  std::optional<std::vector<std::string>> args;  // the job's own arguments, for a job given to the launcher
  bool completed = false;
  std::optional<Seconds> seconds;            // a launched job's, from its start to its end
  std::optional<std::int64_t> threads;       // from its report
  std::optional<double> samples_per_second;  // from its report, over `seconds`
  std::optional<long> retries;               // from its report
  // Memory saved against keeping everything (1 - peak / plain peak), extra
  // time over it (planned / plain - 1) and their ratio, where its report
  // priced the step keeping everything (a shared device); CBR none where
  // the extra time is 0.
  std::optional<double> msr, eor, cbr;
};

struct GroupReport {
  Bytes budget = -1;
  Policy policy = Policy::Arbiter;
  std::string group;
  double compute_slots = 0;
  Seconds makespan = 0;
  long violations = 0;  // the group's over its budget, and its jobs' own
  Bytes max_total_live = 0, calibration_max_total_live = 0;
  std::optional<double> jain_index;  // of the completed jobs' slowdowns against keeping everything
  std::int64_t refusals = 0;
  std::string refused;  // why the group refused to start, or empty
  std::vector<JobFigures> jobs;
};

GroupReport group_report(const LaunchOptions& options, const LaunchResult& result);

}  // namespace memtrain::jobs
