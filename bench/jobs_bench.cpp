// Several jobs on one device: `memtrain jobs` with the Brown tagger (lengths
// change every step), the Fashion-MNIST ResNet (sizes change every step) and
// the GPT, one compute thread each, under every policy side by side.
//  - B_s, the least budget at which `static` completes all three: the bench
//    starts from the jobs' least budgets (static needs 3x the largest) and
//    raises it by 5% until static completes;
//  - at B_s: every policy's makespan, violations, largest total live bytes,
//    Jain's index, and each job's time against static's;
//  - at 0.6 x B_s: the policies again (static cannot; arbiter must);
//  - one job killed mid-run and a fourth joining: reclaim time and lease delay;
//  - each completed run priced by the group Simulator (`simulate --jobs`)
//    from the jobs' own chains and input sizes, against its measured time.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/lockstep.h"
#include "bench/memtrain_processes.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/units.h"

namespace memtrain::bench {

namespace {

using nlohmann::json;

struct Run {
  std::string policy;
  Bytes budget = 0;
  json report;  // memtrain jobs --json; null when the group was refused
  bool all_completed() const {
    if (!report.is_object()) return false;
    for (const json& j : report["jobs"])
      if (!j["completed"].get<bool>()) return false;
    return true;
  }
  int index = 0;  // its folder: run<index>
  double makespan() const { return report["summary"]["makespan_seconds"].get<double>(); }
};

// `memtrain jobs` with `jobs` (flags of each) and `extra` flags; a refused
// or failed group (exit 1) is a run that did not complete, not an error.
Run run_group(const std::vector<std::string>& jobs, const std::string& policy, Bytes budget,
              const std::vector<std::string>& extra, const std::string& dir, int index) {
  const std::string tag = dir + "/run" + std::to_string(index);
  std::vector<std::string> args = {"jobs",   "--budget",    std::to_string(budget), "--policy", policy,
                                   "--json", tag + ".json", "--work-dir",           tag,        "--quiet"};
  for (const std::string& j : jobs) args.insert(args.end(), {"--job", j});
  args.insert(args.end(), extra.begin(), extra.end());
  std::fprintf(stderr, "jobs_bench: %s at %s\n", policy.c_str(), format_bytes(budget).c_str());
  const pid_t pid = start_memtrain(args, tag + ".log");
  Run r;
  r.policy = policy;
  r.budget = budget;
  r.index = index;
  try {
    finish_memtrain(pid, tag + ".log");
  } catch (const Error&) {
  }
  if (::access((tag + ".json").c_str(), R_OK) == 0) r.report = read_json_file(tag + ".json");
  return r;
}

std::string mib(double bytes) { return fixed(bytes / (1 << 20), 1); }

// Each job's own `train --json` report of a run, in --job order.
std::vector<json> job_reports(const std::string& dir, const Run& run, size_t jobs) {
  std::vector<json> out;
  for (size_t j = 0; j < jobs; ++j)
    out.push_back(read_json_file(dir + "/run" + std::to_string(run.index) + "/job-" + std::to_string(j + 1) + ".json"));
  return out;
}

// A job's planned steps (not its collection steps).
std::vector<json> planned_steps(const json& report) {
  std::vector<json> out;
  for (const json& s : report["steps"])
    if (s["plan"] != "collect") out.push_back(s);
  return out;
}

// The run's training span as measured: the longest of the jobs' planned
// steps added up (lease waits included); collection and start-up left out.
double measured_span(const std::vector<json>& reports) {
  double span = 0;
  for (const json& report : reports) {
    double t = 0;
    for (const json& s : planned_steps(report)) t += s["seconds"].get<double>();
    span = std::max(span, t);
  }
  return span;
}

// The jobs file for `simulate --jobs` of one run: each job's chain (saved by
// the job), its planned steps' input sizes and its per-step time outside
// the schedule, as `overheads` (from the static run at B_s) gives it; the
// two cores as two compute slots, slowed by `contention` side by side.
std::string write_jobs_file(const std::string& dir, const std::vector<json>& reports,
                            const std::vector<double>& overheads, double contention, int index) {
  json file = {{"device", {{"compute_slots", 2}, {"contention", contention}, {"copy_engines", 2}}},
               {"jobs", json::array()}};
  for (size_t j = 0; j < reports.size(); ++j) {
    const json& report = reports[j];
    const double largest = report["largest_input_size"].get<double>();
    json sizes = json::array();
    const std::vector<json> steps = planned_steps(report);
    for (const json& s : steps) sizes.push_back(std::min(1.0, s["input_size"].get<double>() / largest));
    file["jobs"].push_back({{"label", "job " + std::to_string(j + 1)},
                            {"chain", dir + "/chain-" + std::to_string(j + 1) + ".json"},
                            {"planner", report["planner"]},
                            {"steps", static_cast<long>(steps.size())},
                            {"sizes", sizes},
                            {"overhead_seconds", overheads[j]}});
  }
  const std::string path = dir + "/sim" + std::to_string(index) + ".json";
  std::ofstream(path) << file.dump(1);
  return path;
}

// Run `r` priced by `memtrain simulate --jobs`: its makespan, or -1 when
// the Simulator failed.
double simulated_span(const std::string& dir, const Run& r, const std::vector<json>& reports,
                      const std::vector<double>& overheads, double contention) {
  const std::string file = write_jobs_file(dir, reports, overheads, contention, r.index);
  const std::string out = dir + "/sim" + std::to_string(r.index) + "-out.json";
  const pid_t pid = start_memtrain(
      {"simulate", "--jobs", file, "--policy", r.policy, "--budget", std::to_string(r.budget), "--json", out},
      out + ".log");
  try {
    finish_memtrain(pid, out + ".log");
    return read_json_file(out)["summary"]["makespan_seconds"].get<double>();
  } catch (const Error&) {
    return -1;
  }
}

// The contention (in [0, 2]) at which the Simulator's span of run `r`
// matches its measured span: the slowdown of jobs computing side by side
// on the cores, measured once and used for every other run.
double fitted_contention(const std::string& dir, const Run& r, const std::vector<double>& overheads) {
  const std::vector<json> reports = job_reports(dir, r, 3);
  const double measured = measured_span(reports);
  double low = 0, high = 2;
  if (simulated_span(dir, r, reports, overheads, low) >= measured) return low;
  if (simulated_span(dir, r, reports, overheads, high) <= measured) return high;
  for (int i = 0; i < 12; ++i) {
    const double mid = (low + high) / 2;
    (simulated_span(dir, r, reports, overheads, mid) < measured ? low : high) = mid;
  }
  return (low + high) / 2;
}

// Mean per planned step of what the schedule did not take: data, planning,
// lease waits left out.
std::vector<double> overheads_of(const std::vector<json>& reports) {
  std::vector<double> out;
  for (const json& report : reports) {
    const std::vector<json> steps = planned_steps(report);
    double sum = 0;
    for (const json& s : steps) {
      if (!s["predicted_schedule_seconds"].is_number()) continue;
      sum += s["seconds"].get<double>() - s["lease_wait_seconds"].get<double>() -
             s["predicted_schedule_seconds"].get<double>();
    }
    out.push_back(steps.empty() ? 0 : std::max(0.0, sum / static_cast<double>(steps.size())));
  }
  return out;
}

// One row per policy: makespan, checks, each job's seconds.
void table(std::ostream& md, const std::vector<Run>& runs, const Run* reference) {
  md << "| policy | completed | makespan s | violations | largest total live / budget | Jain | job seconds (tagger / "
        "resnet / gpt) | vs static |\n|---|---|---|---|---|---|---|---|\n";
  for (const Run& r : runs) {
    if (!r.report.is_object()) {
      md << "| " << r.policy << " | no report | | | | | | |\n";
      continue;
    }
    const json& s = r.report["summary"];
    std::string completed = r.all_completed() ? "all" : "";
    std::string seconds, versus;
    for (size_t j = 0; j < r.report["jobs"].size(); ++j) {
      const json& job = r.report["jobs"][j];
      if (!job["completed"].get<bool>()) completed += (completed.empty() ? "not " : ", not ") + std::to_string(j + 1);
      seconds += (j ? " / " : "") + (job["seconds"].is_number() ? fixed(job["seconds"], 1) : std::string("-"));
      if (reference && reference->all_completed() && job["completed"].get<bool>()) {
        versus += (j ? " / " : "") +
                  fixed(job["seconds"].get<double>() / reference->report["jobs"][j]["seconds"].get<double>(), 2);
      }
    }
    md << "| " << r.policy << " | " << completed << " | " << fixed(s["makespan_seconds"], 1) << " | "
       << s["violations"].get<long>() << " | " << mib(s["max_total_live_bytes"].get<double>()) << " / "
       << mib(static_cast<double>(r.budget)) << " MiB | "
       << (s["jain_index"].is_number() ? fixed(s["jain_index"], 3) : std::string("-")) << " | " << seconds << " | "
       << versus << " |\n";
  }
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "jobs_bench");
  const std::string out_path = flags.text("out", "docs/BENCHMARKS.md");
  const std::int64_t steps = flags.integer("steps", 20, 4, 10000);
  const std::int64_t batch = flags.integer("batch", 8, 1, 1024);
  flags.check_all_used();

  char pattern[] = "/tmp/memtrain-jobs-bench-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string common = "--steps " + std::to_string(steps) + " --batch " + std::to_string(batch) + " --threads 1";
  // Each job saves its calibrated chain for the group Simulator.
  const std::vector<std::string> jobs = {common + " --save-chain " + dir + "/chain-1.json",
                                         common + " --model resnet --save-chain " + dir + "/chain-2.json",
                                         common + " --model gpt --save-chain " + dir + "/chain-3.json"};
  int index = 0;

  // The jobs' least budgets, from a group refused at 1 byte (it calibrates, then says).
  const Run probe = run_group(jobs, "static", 1, {}, dir, index++);
  if (!probe.report.is_object()) throw Error("jobs_bench: the probe group wrote no report (" + dir + ")");
  Bytes most_least = 0;
  for (const json& j : probe.report["jobs"]) most_least = std::max(most_least, j["least_budget_bytes"].get<Bytes>());
  if (most_least <= 0) throw Error("jobs_bench: the probe found no least budget (" + dir + ")");

  Bytes b_s = 3 * most_least;
  Run static_at_bs;
  for (int tries = 0;; ++tries) {
    static_at_bs = run_group(jobs, "static", b_s, {}, dir, index++);
    if (static_at_bs.all_completed()) break;
    if (tries >= 12) throw Error("jobs_bench: static did not complete up to " + format_bytes(b_s));
    b_s = b_s * 105 / 100;
  }
  std::vector<Run> at_bs = {static_at_bs};
  for (const char* p : {"proportional", "fcfs", "tensile", "arbiter"})
    at_bs.push_back(run_group(jobs, p, b_s, {}, dir, index++));
  const Bytes low = b_s * 6 / 10;
  std::vector<Run> at_low;
  for (const char* p : {"static", "proportional", "fcfs", "tensile", "arbiter"})
    at_low.push_back(run_group(jobs, p, low, {}, dir, index++));
  // Kill the ResNet half way; a second tagger joins after as many group steps.
  std::vector<std::string> churn_jobs = jobs;
  churn_jobs.push_back(common + " --seed 2");
  const Run churn =
      run_group(churn_jobs, "arbiter", b_s,
                {"--kill-after", "2:" + std::to_string(steps / 2), "--start-after", "4:" + std::to_string(steps / 2)},
                dir, index++);

  std::ostringstream md;
  md << "## Several jobs sharing one device budget (CPU)\n\n"
     << "Command: `build/bench/jobs_bench` (or `scripts/bench.sh jobs`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Jobs, each its own `memtrain train` process with one compute thread, " << steps << " steps, batch " << batch
     << ", planner mimose: the Brown tagger, the Fashion-MNIST ResNet (sides 28..112 px) and the GPT, started "
        "together under `memtrain jobs`. Least budgets at the largest inputs: ";
  for (size_t j = 0; j < probe.report["jobs"].size(); ++j)
    md << (j ? ", " : "") << mib(probe.report["jobs"][j]["least_budget_bytes"].get<double>()) << " MiB";
  md << "; unconstrained peaks: ";
  for (size_t j = 0; j < probe.report["jobs"].size(); ++j)
    md << (j ? ", " : "") << mib(probe.report["jobs"][j]["reference_peak_bytes"].get<double>()) << " MiB";
  md << ". B_s, the least budget (in steps of 5% from 3x the largest least budget) at which `static` completes all "
        "three: "
     << mib(static_cast<double>(b_s)) << " MiB.\n\n"
     << "### At B_s\n\n";
  table(md, at_bs, &at_bs[0]);
  md << "\n### At 0.6 x B_s = " << mib(static_cast<double>(low)) << " MiB\n\n";
  table(md, at_low, &at_bs[0]);
  md << "\n\"vs static\": each job's seconds over its seconds under `static` at B_s.\n\n";

  // Each completed run priced by the group Simulator.
  // The static run at B_s measures what the Simulator does not know: each
  // job's time outside its schedule, and the slowdown side by side.
  const std::vector<double> overheads = overheads_of(job_reports(dir, static_at_bs, 3));
  const double contention = fitted_contention(dir, static_at_bs, overheads);
  md << "\n### Simulated against measured\n\n"
     << "Each completed run priced by `memtrain simulate --jobs` from the jobs' saved chains and their planned "
        "steps' input sizes, with two compute slots (the two cores). Measured once, on the `static` run at B_s: "
        "each job's time per step outside its schedule (data, planning): ";
  for (size_t j = 0; j < overheads.size(); ++j) md << (j ? ", " : "") << fixed(overheads[j], 4) << " s";
  md << "; and the slowdown of two jobs computing side by side (`contention`), fitted so that the Simulator "
        "matches that run: "
     << fixed(contention, 3)
     << ". Measured: the longest of the jobs' planned steps added up (their lease waits included; start-up and "
        "collection steps left out). The other runs check the model.\n\n"
     << "| budget | policy | measured s | simulated s | simulated / measured |\n|---|---|---|---|---|\n";
  double worst_error = 0;
  bool every_policy = true;
  for (const std::vector<Run>* set : {&at_bs, &at_low}) {
    for (const Run& r : *set) {
      if (!r.all_completed()) continue;
      const std::vector<json> reports = job_reports(dir, r, 3);
      const double measured = measured_span(reports);
      const double simulated = simulated_span(dir, r, reports, overheads, contention);
      const bool fitted = &r == &at_bs[0];  // static at B_s
      const double ratio = simulated / measured;
      if (simulated <= 0) every_policy = false;
      if (simulated > 0 && !fitted) worst_error = std::max(worst_error, std::abs(ratio - 1));
      md << "| " << (set == &at_bs ? "B_s" : "0.6 x B_s") << " | " << r.policy << (fitted ? " (the fit)" : "") << " | "
         << fixed(measured, 2) << " | " << (simulated > 0 ? fixed(simulated, 2) : std::string("failed")) << " | "
         << (simulated > 0 ? fixed(ratio, 3) : std::string("-")) << " |\n";
    }
  }
  md << "\n";

  const Run& arbiter = at_bs[4];
  const Run& arbiter_low = at_low[4];
  bool safe = true;
  for (const std::vector<Run>* set : {&at_bs, &at_low}) {
    for (const Run& r : *set) {
      if (!r.report.is_object()) continue;
      const json& s = r.report["summary"];
      safe = safe && s["violations"].get<long>() == 0 &&
             s["max_total_live_bytes"].get<double>() <= static_cast<double>(r.budget);
    }
  }
  target_line(md, safe, "0 violations and largest total live within the budget, every policy, every run");
  // The arbiter against the best other policy that completed, at each budget.
  for (const std::vector<Run>* set : {&at_bs, &at_low}) {
    const std::string where = set == &at_bs ? "B_s" : "0.6 x B_s";
    const Run& mine = set->back();  // arbiter, last of each set
    double best = 0;
    std::string best_policy;
    for (const Run& r : *set) {
      if (&r == &mine || !r.all_completed()) continue;
      if (best_policy.empty() || r.makespan() < best) best = r.makespan(), best_policy = r.policy;
    }
    if (!mine.all_completed()) {
      target_line(md, best_policy.empty(), "arbiter completes at " + where + " wherever another policy does");
    } else if (!best_policy.empty()) {
      target_line(md, mine.makespan() <= 1.03 * best,
                  "arbiter at most 3% slower than the best other policy at " + where + ": " +
                      fixed(mine.makespan() / best, 3) + "x " + best_policy + "'s makespan");
    }
  }
  if (arbiter.all_completed()) {
    double worst = 0;
    for (size_t j = 0; j < 3; ++j) {
      worst = std::max(worst, arbiter.report["jobs"][j]["seconds"].get<double>() /
                                  static_at_bs.report["jobs"][j]["seconds"].get<double>());
    }
    const double jain = arbiter.report["summary"]["jain_index"].get<double>();
    md << "- static's makespan at B_s over arbiter's: " << fixed(static_at_bs.makespan() / arbiter.makespan(), 2)
       << " (reported; memory binds little at B_s)\n";
    target_line(md, worst <= 1.10,
                "no job more than 10% slower under arbiter than under static at B_s: worst " + fixed(worst, 2) + "x");
    target_line(md, jain >= 0.9, "Jain's index at least 0.9 under arbiter: " + fixed(jain, 3));
  }
  target_line(md, arbiter_low.all_completed() && arbiter_low.makespan() <= static_at_bs.makespan(),
              "arbiter completes at 0.6 x B_s with a makespan no longer than static's at B_s: " +
                  (arbiter_low.all_completed()
                       ? fixed(arbiter_low.makespan(), 1) + " s against " + fixed(static_at_bs.makespan(), 1) + " s"
                       : std::string("it did not complete")));
  if (churn.report.is_object()) {
    const json& killed = churn.report["jobs"][1];
    const json& late = churn.report["jobs"][3];
    bool others = true;
    for (size_t j : {size_t{0}, size_t{2}, size_t{3}})
      others = others && churn.report["jobs"][j]["completed"].get<bool>();
    const double reclaim =
        killed["reclaimed_after_seconds"].is_number() ? killed["reclaimed_after_seconds"].get<double>() : 1e9;
    target_line(md, others && churn.report["summary"]["violations"].get<long>() == 0,
                "the ResNet killed (SIGKILL) after " + std::to_string(steps / 2) +
                    " steps: the other three complete, 0 violations");
    target_line(md, reclaim <= 1.0,
                "its " + mib(killed["reclaimed_bytes"].get<double>()) +
                    " MiB reclaimed within 1 s: " + fixed(reclaim, 3) + " s after it died");
    target_line(md, late["lease_delay_steps"].is_number() && late["lease_delay_steps"].get<long>() <= 2,
                "a fourth job (the tagger, seed 2) joining after " + std::to_string(steps / 2) +
                    " group steps is leased memory within two of the others' steps: " +
                    (late["lease_delay_steps"].is_number() ? std::to_string(late["lease_delay_steps"].get<long>())
                                                           : std::string("never")));
  } else {
    target_line(md, false, "the run with a killed and a joining job wrote its report");
  }
  target_line(md, every_policy && worst_error <= 0.10,
              "simulated training span within 10% of measured, every completed run but the fit: worst " +
                  fixed(100 * worst_error, 1) + "%");
  std::system(("rm -rf '" + dir + "'").c_str());
  publish("jobs_bench", md.str(), out_path);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) { return memtrain::bench::bench_main("jobs_bench", memtrain::bench::run, argc, argv); }
