#include "jobs/group_report.h"

#include <algorithm>

namespace memtrain::jobs {

namespace {

// From a job's own report: samples per second, retries, and the
// Simulator's peaks and times for what ran and for keeping everything.
// Returns the job's slowdown against keeping everything, where known.
std::optional<double> add_run_figures(const JobRunReport& report, bool completed, JobFigures& f, long& violations) {
  double samples = 0, planned = 0, plain_planned = 0, plain_all = 0;
  double peak = 0, plain_peak = 0;
  for (const JobRunReport::Step& step : report.steps) {
    if (!step.collection) {
      peak = std::max(peak, step.peak_bytes);
      plain_peak = std::max(plain_peak, step.predicted_plain_peak_bytes.value_or(0.0));
    }
    samples += step.samples;
    if (step.predicted_plain_seconds) plain_all += *step.predicted_plain_seconds;
    if (!step.collection && step.predicted_plain_seconds && step.predicted_schedule_seconds) {
      planned += *step.predicted_schedule_seconds;
      plain_planned += *step.predicted_plain_seconds;
    }
  }
  const Seconds seconds = f.seconds.value_or(0);
  if (seconds > 0) f.samples_per_second = samples / seconds;
  f.threads = report.threads;
  f.retries = report.retries;
  violations += report.violations;
  if (plain_peak > 0) f.msr = 1 - peak / plain_peak;
  if (plain_planned > 0) {
    f.eor = planned / plain_planned - 1;
    if (*f.eor > 0 && f.msr) f.cbr = *f.msr / *f.eor;  // EOR 0: CBR unbounded, reported as none
  }
  if (completed && plain_all > 0) return seconds / plain_all;
  return std::nullopt;
}

}  // namespace

GroupReport group_report(const LaunchOptions& o, const LaunchResult& r) {
  GroupReport g;
  g.budget = r.group.budget;
  g.policy = o.group.policy;
  g.group = o.group.name;
  g.compute_slots = o.group.compute_slots;
  g.makespan = r.makespan;
  g.violations = r.group.budget >= 0 && r.group.max_live > r.group.budget ? 1 : 0;
  g.max_total_live = r.group.max_live;
  g.calibration_max_total_live = r.group.calibration_max_live;
  g.refusals = r.group.refusals;
  g.refused = r.group.refused;
  std::vector<double> slowdowns;
  for (std::size_t i = 0; i < r.jobs.size(); ++i) {
    JobFigures f;
    f.index = i + 1;
    f.outcome = r.jobs[i];
    const MemberState* m = r.group.member(f.outcome.pid);
    if (m) f.member = *m;
    f.completed = f.outcome.exit_code == 0 && m && m->status == MemberState::Finished;
    if (f.outcome.launched) f.seconds = f.outcome.ended - f.outcome.started;
    if (i < o.jobs.size()) f.args = o.jobs[i].args;
    const std::optional<JobRunReport> report =
        f.outcome.launched && o.read_report ? o.read_report(f.outcome.report_path) : std::nullopt;
    if (report) {
      if (const std::optional<double> slowdown = add_run_figures(*report, f.completed, f, g.violations))
        slowdowns.push_back(*slowdown);
    }
    g.jobs.push_back(std::move(f));
  }
  if (!slowdowns.empty()) g.jain_index = jain_index(slowdowns);
  return g;
}

}  // namespace memtrain::jobs
