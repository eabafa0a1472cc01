// `memtrain jobs`: starts a job group and its jobs, each a process of its
// own that joins the group (the CLI's `memtrain train --share`, whose
// command line the caller builds), watches them until all have ended, and
// reclaims the memory of any that dies on the way.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jobs/job_group.h"

namespace memtrain::jobs {

struct JobSpec {
  // The job's own arguments, as the command that runs it takes them: the
  // launcher hands them to LaunchOptions::job_arguments and reports them,
  // and reads none of them.
  std::vector<std::string> args;
  // The compute threads it runs with: > 0 its own; 0 its share of the cores
  // (share_cores sets it); < 0 named in its arguments with a value its
  // command will refuse.
  int threads = 0;
  // Starts once the group's jobs have taken this many steps together (0: at once).
  std::int64_t start_after_steps = 0;
  // Killed with SIGKILL once it has taken this many steps (-1: never); for
  // checking that a dead job loses the others nothing.
  std::int64_t kill_after_steps = -1;
};

// What a job's own run reported, as the launcher needs it. The front end
// that built the job's command reads its report (LaunchOptions::read_report).
struct JobRunReport {
  struct Step {
    bool collection = false;  // a collection step measures; it does not schedule
    double samples = 1;       // the batch's rows
    double peak_bytes = 0;
    // The Simulator's, where the run priced them (on a shared device): the
    // step keeping everything, and the schedule that ran.
    std::optional<double> predicted_plain_peak_bytes, predicted_plain_seconds, predicted_schedule_seconds;
  };
  std::optional<std::int64_t> threads;  // the compute threads it ran with
  std::vector<Step> steps;
  long retries = 0, violations = 0;
};

struct LaunchOptions {
  GroupSettings group;        // expected_jobs: set from the jobs that start at once
  std::vector<JobSpec> jobs;  // none: host the group for jobs started by hand
  int hosted_jobs = 0;        // with no jobs: how many to wait for
  std::string program;        // the executable that runs a job
  // The arguments after `program` that run job `index` (0-based) in the
  // group, writing its JSON report to `report_path`.
  std::function<std::vector<std::string>(const JobSpec& job, size_t index, const std::string& report_path)>
      job_arguments;
  // Job `index`'s report at `report_path`, once it ended; none where it
  // wrote none, or none readable.
  std::function<std::optional<JobRunReport>(const std::string& report_path)> read_report;
  std::string work_dir;  // each job's JSON report and log go here
  bool progress = true;  // a line on stderr as each job starts and ends
};

struct JobOutcome {
  std::int32_t pid = 0;
  bool launched = false;  // started by the launcher (else: joined by hand)
  int exit_code = -1;     // -1: killed by a signal
  int signal = 0;
  std::string error;               // the job's last line on stderr when it failed
  Seconds started = 0, ended = 0;  // since the launch
  Seconds reclaimed_after = -1;    // from its end to its bytes being free again; -1: none held
  std::string log_path, report_path;
};

struct LaunchResult {
  GroupState group;              // at the end
  std::vector<JobOutcome> jobs;  // in --job order, then jobs that joined by hand
  Seconds makespan = 0;          // first start to last end
};

LaunchResult launch(const LaunchOptions& options);

}  // namespace memtrain::jobs
