#include "jobs/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/seconds_since.h"

extern char** environ;

namespace memtrain::jobs {

namespace {

using Clock = std::chrono::steady_clock;
constexpr Seconds kWatchPeriod = 0.02;  // the launcher looks at its jobs this often

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

std::int32_t spawn_job(const LaunchOptions& o, size_t index, const std::string& report, const std::string& log) {
  MEMTRAIN_ASSERT(o.job_arguments, "a launch with jobs says how to run one");
  std::vector<std::string> argv = {o.program};
  for (std::string& a : o.job_arguments(o.jobs[index], index, report)) argv.push_back(std::move(a));
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  pid_t pid = 0;
  const int r = posix_spawn(&pid, o.program.c_str(), &files, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (r != 0) throw Error("cannot start " + o.program + " (log " + log + "): " + std::strerror(r));
  return static_cast<std::int32_t>(pid);
}

// What ended a job left (`status` from waitpid; `killed`: by the launcher,
// as its spec asked): its end, exit code or signal, error line, and how soon
// after its end the group had its bytes back.
void record_end(JobOutcome& out, int status, bool killed, const JobSpec& job, JobGroup& group,
                Clock::time_point start) {
  if (!killed) out.ended = seconds_since(start);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  group.reap();
  const GroupState now = group.state();  // kept: the member points into it
  const MemberState* after = now.member(out.pid);
  if (after && after->reclaimed > 0) out.reclaimed_after = seconds_since(start) - out.ended;
  if (killed)
    out.error = "killed with SIGKILL after " + std::to_string(job.kill_after_steps) + " steps, as asked";
  else if (out.signal)
    out.error = "killed by signal " + std::to_string(out.signal);
  else if (out.exit_code != 0)
    out.error = last_line(out.log_path);
}

// Every one of the `hosted` jobs started by hand has joined, and every member has finished or failed.
bool hosted_jobs_settled(const GroupState& g, int hosted) {
  int settled = 0;
  for (const MemberState& m : g.members) settled += m.status != MemberState::Joined ? 1 : 0;
  return static_cast<int>(g.members.size()) >= hosted && settled == static_cast<int>(g.members.size());
}

std::string never_started(const JobSpec& job, std::int64_t steps) {
  return "not started: the group ended after " + std::to_string(steps) + " steps, before the " +
         std::to_string(job.start_after_steps) + " it was to start after";
}

// The group's settings, expecting the jobs that start at once (or the hosted ones).
GroupSettings group_settings(const LaunchOptions& o) {
  GroupSettings settings = o.group;
  settings.expected_jobs = o.jobs.empty() ? o.hosted_jobs : 0;
  for (const JobSpec& j : o.jobs) settings.expected_jobs += j.start_after_steps == 0 ? 1 : 0;
  return settings;
}

void kill_and_wait(std::int32_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// From the first launched job's start to the last one's end; `whole`, the
// launch's own time, when it launched none.
Seconds makespan(const std::vector<JobOutcome>& jobs, Seconds whole) {
  Seconds first = -1, last = 0;
  for (const JobOutcome& j : jobs) {
    if (!j.launched) continue;
    first = first < 0 ? j.started : std::min(first, j.started);
    last = std::max(last, j.ended);
  }
  return first < 0 ? whole : last - first;
}

// The group's members the launcher did not start, as outcomes after its own.
void add_jobs_joined_by_hand(LaunchResult& result) {
  for (const MemberState& m : result.group.members) {
    const bool ours =
        std::any_of(result.jobs.begin(), result.jobs.end(), [&](const JobOutcome& j) { return j.pid == m.pid; });
    if (ours) continue;
    JobOutcome hand;
    hand.pid = m.pid;
    hand.exit_code = m.status == MemberState::Finished ? 0 : -1;
    result.jobs.push_back(hand);
  }
}

}  // namespace

LaunchResult launch(const LaunchOptions& o) {
  if (!o.jobs.empty() && ::mkdir(o.work_dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("jobs: cannot make the work folder " + o.work_dir + ": " + std::strerror(errno));
  std::unique_ptr<JobGroup> group = JobGroup::create(group_settings(o));
  const Clock::time_point start = Clock::now();
  LaunchResult result;
  result.jobs.resize(o.jobs.size());
  std::vector<bool> started(o.jobs.size(), false), ended(o.jobs.size(), false), killed(o.jobs.size(), false);
  auto spawn = [&](size_t i) {
    JobOutcome& out = result.jobs[i];
    out.report_path = o.work_dir + "/job-" + std::to_string(i + 1) + ".json";
    out.log_path = o.work_dir + "/job-" + std::to_string(i + 1) + ".log";
    std::remove(out.report_path.c_str());
    out.pid = spawn_job(o, i, out.report_path, out.log_path);
    out.launched = true;
    out.started = seconds_since(start);
    started[i] = true;
    if (o.progress) std::fprintf(stderr, "memtrain jobs: job %zu started, pid %d\n", i + 1, out.pid);
  };
  try {
    for (size_t i = 0; i < o.jobs.size(); ++i) {
      if (o.jobs[i].start_after_steps == 0) spawn(i);
    }
    while (true) {
      group->reap();
      const GroupState g = group->state();
      std::int64_t steps = 0;
      for (const MemberState& m : g.members) steps += m.steps;
      bool all_ended = true, running = false;
      for (size_t i = 0; i < o.jobs.size(); ++i) {
        JobOutcome& out = result.jobs[i];
        if (!started[i] && steps >= o.jobs[i].start_after_steps) spawn(i);
        if (!started[i] || ended[i]) {
          all_ended = all_ended && ended[i];
          continue;
        }
        const MemberState* m = g.member(out.pid);
        if (!killed[i] && o.jobs[i].kill_after_steps >= 0 && m && m->steps >= o.jobs[i].kill_after_steps) {
          ::kill(out.pid, SIGKILL);
          killed[i] = true;
          out.ended = seconds_since(start);  // its end, as far as the group is concerned
        }
        int status = 0;
        if (::waitpid(out.pid, &status, WNOHANG) != out.pid) {
          all_ended = false;
          running = true;
          continue;
        }
        ended[i] = true;
        record_end(out, status, killed[i], o.jobs[i], *group, start);
        if (o.progress) {
          std::fprintf(stderr, "memtrain jobs: job %zu (pid %d) %s\n", i + 1, out.pid,
                       out.exit_code == 0 ? "completed"
                       : out.signal       ? ("killed by signal " + std::to_string(out.signal)).c_str()
                                          : ("failed: " + out.error).c_str());
        }
      }
      if (o.jobs.empty()) all_ended = hosted_jobs_settled(g, o.hosted_jobs);
      if (!o.jobs.empty() && !running) {
        // No job runs to take the steps the waiting ones wait for.
        for (size_t i = 0; i < o.jobs.size(); ++i) {
          if (!started[i]) result.jobs[i].error = never_started(o.jobs[i], steps);
        }
        break;
      }
      if (all_ended) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(kWatchPeriod));
    }
  } catch (...) {
    for (size_t i = 0; i < o.jobs.size(); ++i) {
      if (started[i] && !ended[i]) kill_and_wait(result.jobs[i].pid);
    }
    throw;
  }
  result.group = group->state();
  add_jobs_joined_by_hand(result);
  result.makespan = makespan(result.jobs, seconds_since(start));
  return result;
}

namespace {}  // namespace

}  // namespace memtrain::jobs
