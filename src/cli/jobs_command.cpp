// `memtrain jobs`: several training jobs, each its own process, sharing one
// device budget under a policy.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/group_report_json.h"
#include "cli/json_file.h"
#include "cli/memtrain_program.h"
#include "cli/train_report.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "jobs/core_shares.h"
#include "jobs/group_report.h"
#include "jobs/launcher.h"

namespace memtrain::cli {

namespace {

const char* kJobsHelp =
    "usage: memtrain jobs --budget B --policy P --job \"TRAIN FLAGS\" [--job \"TRAIN FLAGS\" ...] [flags]\n"
    "\n"
    "Runs each --job as its own `memtrain train` process (with those flags: model, data, batch,\n"
    "steps, seed, planner) on one device whose memory they share. Every allocation of every job\n"
    "is charged to one counter that never passes the budget; before each step a job asks for a\n"
    "lease (its predicted peak for that input) and the policy decides what it gets.\n"
    "\n"
    "  --budget B           bytes (300MiB) or N% of the sum of the starting jobs' unconstrained\n"
    "                       peaks at their largest inputs\n"
    "  --policy P           static (equal split), proportional (split by unconstrained peak),\n"
    "                       fcfs (requests in order, each its whole want), arbiter (per-step leases\n"
    "                       where memory buys time; older requests first), tensile (TENSILE: fixed\n"
    "                       allotments from the jobs' largest swappable tensors; every job plans\n"
    "                       with --planner tensile)\n"
    "  --job \"FLAGS\"        one job; repeat for more\n"
    "  --json FILE          the group's report: summary and per-job figures (docs/jobs.md)\n"
    "  --name NAME          the group's name (default jobs-<pid>); `memtrain train --share NAME`\n"
    "                       joins it by hand\n"
    "  --expect N           with no --job: host the group for N jobs started by hand\n"
    "  --start-after J:S    start job J once the group has taken S steps (a job joining late)\n"
    "  --kill-after J:S     kill job J with SIGKILL after its S-th step (the others must lose nothing)\n"
    "  --work-dir DIR       where each job's log and JSON go (default: a new folder under /tmp)\n"
    "  --device cpu         the shared device (default cpu)\n"
    "  --quiet              no line per job started and ended\n";

// "a b 'c d'" -> {a, b, c d}
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) throw UsageError("--job '" + text + "' has an unclosed quote");
  if (in_word) words.push_back(word);
  return words;
}

// "J:S" with 1 <= J <= jobs and S >= min_steps.
std::pair<size_t, std::int64_t> job_and_steps(const std::string& flag, const std::string& text, size_t jobs) {
  const size_t colon = text.find(':');
  const auto j = parse_whole_integer(text.substr(0, colon));
  const auto s = colon == std::string::npos ? std::nullopt : parse_whole_integer(text.substr(colon + 1));
  if (!j || !s || *j < 1 || *j > static_cast<std::int64_t>(jobs) || *s < 0) {
    throw UsageError(flag + " '" + text + "' is not J:S; expected a job number 1.." + std::to_string(jobs) +
                     " and a step count >= 0");
  }
  return {static_cast<size_t>(*j - 1), *s};
}

// The flags of `memtrain jobs` as given: jobs, flags given once, and the
// per-job flags given as JOB:STEPS.
struct JobsArgs {
  jobs::LaunchOptions o;
  std::map<std::string, std::string> single;
  std::vector<std::string> start_after, kill_after;
  bool quiet = false, help = false;
  std::string get(const std::string& flag, const std::string& fallback) const {
    const auto it = single.find(flag);
    return it == single.end() ? fallback : it->second;
  }
};

JobsArgs read_jobs_args(const std::vector<std::string>& args) {
  JobsArgs r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      r.help = true;
      return r;
    }
    if (a == "--quiet") {
      r.quiet = true;
      continue;
    }
    static const std::set<std::string> known = {"--budget", "--policy",      "--job",        "--json",     "--name",
                                                "--expect", "--start-after", "--kill-after", "--work-dir", "--device"};
    if (!known.count(a)) throw UsageError("jobs: unknown flag '" + a + "'; see memtrain jobs --help");
    if (i + 1 >= args.size()) throw UsageError("jobs: " + a + " needs a value");
    const std::string& value = args[++i];
    if (a == "--job") {
      jobs::JobSpec spec;
      spec.args = split_words(value);
      for (size_t w = 0; w < spec.args.size(); ++w) {
        const std::string& flag = spec.args[w];
        if (flag == "--share" || flag == "--share-label" || flag == "--budget" || flag == "--json" ||
            flag == "--device") {
          throw UsageError("--job '" + value + "': " + flag + " is the group's to set; give it to memtrain jobs");
        }
        // A count train will refuse stays the job's (< 0), and train says why.
        if (flag == "--threads") {
          spec.threads =
              w + 1 < spec.args.size() ? static_cast<int>(parse_whole_integer(spec.args[w + 1]).value_or(-1)) : -1;
          if (spec.threads == 0) spec.threads = -1;
        }
      }
      r.o.jobs.push_back(spec);
    } else if (a == "--start-after") {
      r.start_after.push_back(value);
    } else if (a == "--kill-after") {
      r.kill_after.push_back(value);
    } else {
      if (r.single.count(a)) throw UsageError("jobs: " + a + " is given twice");
      r.single[a] = value;
    }
  }
  return r;
}

// The group: budget, policy (TENSILE plans every job with --planner tensile), device, name.
void set_group(const JobsArgs& r, jobs::LaunchOptions& o) {
  if (!r.single.count("--budget")) throw UsageError("jobs: --budget is required (bytes, or N% of the jobs' peaks)");
  if (!r.single.count("--policy"))
    throw UsageError(std::string("jobs: --policy is required; expected ") + jobs::kPolicyNames);
  o.group.budget = parse_budget(r.get("--budget", ""), "--budget");
  o.group.policy = jobs::parse_policy(r.get("--policy", ""));
  if (o.group.policy == jobs::Policy::Tensile) {
    for (jobs::JobSpec& spec : o.jobs) {
      const auto it = std::find(spec.args.begin(), spec.args.end(), "--planner");
      if (it == spec.args.end()) {
        spec.args.insert(spec.args.end(), {"--planner", "tensile"});
      } else if (it + 1 != spec.args.end() && *(it + 1) != "tensile") {
        throw UsageError(std::string("--job: --policy tensile plans every job with ") +
                         "--planner tensile; drop --planner " + *(it + 1) + " from that job");
      }
    }
  }
  o.group.device = r.get("--device", "cpu");
  jobs::check_group_device(o.group.device, "jobs: --device");
  o.group.name = r.get("--name", "jobs-" + std::to_string(::getpid()));
}

// Which jobs the group starts or hosts, when each starts and is killed, and where they work.
void set_jobs(const JobsArgs& r, jobs::LaunchOptions& o) {
  if (r.single.count("--expect")) {
    const std::int64_t n = parse_whole_integer(r.get("--expect", "")).value_or(0);
    if (n < 1 || n > jobs::kMaxJobs)
      throw UsageError("jobs: --expect '" + r.get("--expect", "") + "' is out of range; expected 1.." +
                       std::to_string(jobs::kMaxJobs));
    if (!o.jobs.empty()) throw UsageError("jobs: --expect is for jobs started by hand; give it without --job");
    o.hosted_jobs = static_cast<int>(n);
  } else if (o.jobs.empty()) {
    throw UsageError("jobs: give at least one --job (or --name and --expect N to host jobs started by hand)");
  }
  for (const std::string& t : r.start_after) {
    const auto [j, s] = job_and_steps("--start-after", t, o.jobs.size());
    o.jobs[j].start_after_steps = s;
  }
  for (const std::string& t : r.kill_after) {
    const auto [j, s] = job_and_steps("--kill-after", t, o.jobs.size());
    o.jobs[j].kill_after_steps = s;
  }
  bool any_at_once = o.jobs.empty();
  for (const jobs::JobSpec& j : o.jobs) any_at_once = any_at_once || j.start_after_steps == 0;
  if (!any_at_once) throw UsageError("jobs: every job waits (--start-after); at least one must start at once");
  o.work_dir = r.get("--work-dir", "");
  if (o.work_dir.empty()) {
    char dir[] = "/tmp/memtrain-jobs-XXXXXX";
    if (!::mkdtemp(dir)) throw Error("jobs: cannot make a work folder under /tmp");
    o.work_dir = dir;
  }
  o.program = memtrain_program();
  // Each job is `memtrain train` in the group, with its threads when it names none itself.
  o.read_report = read_job_run_report;
  o.job_arguments = [group = o.group.name](const jobs::JobSpec& job, size_t index, const std::string& report) {
    std::vector<std::string> argv = {"train"};
    argv.insert(argv.end(), job.args.begin(), job.args.end());
    if (std::find(job.args.begin(), job.args.end(), "--threads") == job.args.end() && job.threads > 0) {
      argv.insert(argv.end(), {"--threads", std::to_string(job.threads)});
    }
    argv.insert(argv.end(),
                {"--share", group, "--share-label", "job " + std::to_string(index + 1), "--json", report, "--quiet"});
    return argv;
  };
  o.progress = !r.quiet;
  // Each job its share of the cores, unless its flags say otherwise.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<int> threads = jobs::share_cores(o.jobs, cores);
  // What the arbiter weighs waiting against recomputation with.
  o.group.compute_slots = jobs::compute_slots(threads, cores);
}

// One line for the group and one per job; false when a job not meant to be killed did not complete.
bool print_jobs_outcome(const jobs::LaunchOptions& o, const jobs::LaunchResult& result,
                        const jobs::GroupReport& report) {
  std::printf("memtrain jobs: policy %s, budget %s; makespan %.2f s; largest total live %s; %ld violations\n",
              jobs::policy_name(report.policy), format_bytes(report.budget).c_str(), report.makespan,
              format_bytes(report.max_total_live).c_str(), report.violations);
  if (report.policy == jobs::Policy::Arbiter) {
    std::printf("memtrain jobs: the arbiter weighed waiting against recomputation on %.3g compute slots\n",
                result.group.compute_slots);
  }
  bool ok = true;
  for (const jobs::JobFigures& j : report.jobs) {
    const size_t i = j.index - 1;
    const bool meant_to_die = i < o.jobs.size() && o.jobs[i].kill_after_steps >= 0;
    if (!j.completed && !meant_to_die) ok = false;
    const std::int64_t count = j.threads.value_or(0);
    const std::string threads =
        count > 0 ? std::to_string(count) + (count == 1 ? " thread" : " threads") : "threads unknown";
    const jobs::MemberState none;
    const jobs::MemberState& m = j.member ? *j.member : none;
    std::printf(
        "memtrain jobs: job %zu (pid %d, %s) %s: %lld steps, held at most %s (its measurements included), waited %.2f "
        "s for leases%s%s\n",
        i + 1, j.outcome.pid, threads.c_str(), j.completed ? "completed" : "did not complete",
        static_cast<long long>(m.steps), format_bytes(m.peak).c_str(), m.wait_seconds,
        j.outcome.error.empty() ? "" : "; ", j.outcome.error.c_str());
    // How the arbiter granted this job's leases ("whole 18, knee 1, ...").
    std::string choices;
    for (const auto& [choice, n] : m.arbiter_choices) {
      choices += (choices.empty() ? "" : ", ") + choice + " " + std::to_string(n);
    }
    if (!choices.empty()) std::printf("memtrain jobs: job %zu's leases: %s\n", i + 1, choices.c_str());
    if (m.replans > 0) {
      const std::string times = m.replans == 1 ? "once" : std::to_string(m.replans) + " times";
      std::printf("memtrain jobs: job %zu's allotment planned again %s (its need drifted over 30%%)\n", i + 1,
                  times.c_str());
    }
  }
  return ok;
}

}  // namespace

int run_jobs(const std::vector<std::string>& args) {
  JobsArgs r = read_jobs_args(args);
  if (r.help) {
    std::fputs(kJobsHelp, stdout);
    return 0;
  }
  jobs::LaunchOptions& o = r.o;
  set_group(r, o);
  set_jobs(r, o);
  const std::string json_path = r.get("--json", "");
  const jobs::LaunchResult result = jobs::launch(o);
  const jobs::GroupReport report = jobs::group_report(o, result);
  if (!json_path.empty()) write_json_file(group_report_json(report), json_path);
  const bool ok = print_jobs_outcome(o, result, report);
  if (!result.group.refused.empty()) {
    std::fprintf(stderr, "memtrain: jobs: %s\n", result.group.refused.c_str());
    return 1;
  }
  return ok ? 0 : 1;
}

}  // namespace memtrain::cli
