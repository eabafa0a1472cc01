// Several jobs on one device: `memtrain jobs` with the Brown tagger (lengths
// change every step), the Fashion-MNIST ResNet (sizes change every step) and
// the GPT, each with default flags (the launcher shares out the cores),
// under every policy side by side.
//  - B_s, the least budget at which `static` completes all three: the bench
//    starts from the jobs' least budgets (static needs 3x the largest) and
//    raises it by 5% until static completes;
//  - the group Simulator's sweep of these jobs (`simulate --jobs --sweep`),
//    from the chains and sizes of the static run at B_s;
//  - the measured sweep: budgets from the least any policy completes in
//    that simulation to 100%, and B_s; every policy several times at each,
//    in turns A B C D E, E D C B A, so that drift weighs on each alike;
//    means, spreads, each job's time against static's, CSV and plot;
//  - one job killed mid-run and a fourth joining: reclaim time and lease delay;
//  - each completed run priced by the group Simulator against its measured time.
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
#include "cli/gnuplot.h"
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

// `memtrain jobs` with `jobs` (flags of each; @RUN@ stands for the run's own
// folder) and `extra` flags; a refused or failed group (exit 1) is a run
// that did not complete, not an error.
Run run_group(const std::vector<std::string>& jobs, const std::string& policy, Bytes budget,
              const std::vector<std::string>& extra, const std::string& dir, int index) {
  const std::string tag = dir + "/run" + std::to_string(index);
  std::vector<std::string> args = {"jobs",   "--budget",    std::to_string(budget), "--policy", policy,
                                   "--json", tag + ".json", "--work-dir",           tag,        "--quiet"};
  for (std::string j : jobs) {
    for (size_t at = j.find("@RUN@"); at != std::string::npos; at = j.find("@RUN@")) j.replace(at, 5, tag);
    args.insert(args.end(), {"--job", j});
  }
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

// The jobs file `path` for `simulate --jobs` of run `index`: each job's
// chain (saved by the job in that run), its planned steps' input sizes and
// its per-step time outside the schedule, as `overheads` (from the static
// run at B_s) gives it; the two cores as two compute slots, slowed by
// `contention` side by side.
std::string write_jobs_file(const std::string& dir, int index, const std::vector<json>& reports,
                            const std::vector<double>& overheads, double contention, const std::string& path) {
  json file = {{"device", {{"compute_slots", 2}, {"contention", contention}, {"copy_engines", 2}}},
               {"jobs", json::array()}};
  for (size_t j = 0; j < reports.size(); ++j) {
    const json& report = reports[j];
    const double largest = report["largest_input_size"].get<double>();
    json sizes = json::array();
    const std::vector<json> steps = planned_steps(report);
    if (steps.empty()) {
      throw UsageError("jobs_bench: job " + std::to_string(j + 1) + " of run " + std::to_string(index) +
                       " planned no step: every step collected; give --steps more than its collection steps (4)");
    }
    for (const json& s : steps) sizes.push_back(std::min(1.0, s["input_size"].get<double>() / largest));
    file["jobs"].push_back(
        {{"label", "job " + std::to_string(j + 1)},
         {"chain", dir + "/run" + std::to_string(index) + "/chain-" + std::to_string(j + 1) + ".json"},
         {"planner", report["planner"]},
         {"steps", static_cast<long>(steps.size())},
         {"sizes", sizes},
         {"overhead_seconds", overheads[j]}});
  }
  std::ofstream(path) << file.dump(1);
  return path;
}

// Run `r` priced by `memtrain simulate --jobs`: its makespan, or -1 when
// the Simulator failed.
double simulated_span(const std::string& dir, const Run& r, const std::vector<json>& reports,
                      const std::vector<double>& overheads, double contention) {
  const std::string file =
      write_jobs_file(dir, r.index, reports, overheads, contention, dir + "/sim" + std::to_string(r.index) + ".json");
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

const std::vector<std::string> kPolicies = {"static", "proportional", "fcfs", "tensile", "arbiter"};

// One budget of the measured sweep: every policy's runs, taken in turns.
struct SweepPoint {
  Bytes budget = 0;
  double percent = 0;  // of the sum of the jobs' unconstrained peaks
  std::map<std::string, std::vector<Run>> runs;

  // Every repeat of `policy` completed the group.
  bool completed(const std::string& policy) const {
    const std::vector<Run>& rs = runs.at(policy);
    return !rs.empty() && std::all_of(rs.begin(), rs.end(), [](const Run& r) { return r.all_completed(); });
  }
  double mean(const std::string& policy) const {
    double sum = 0;
    for (const Run& r : runs.at(policy)) sum += r.makespan();
    return sum / static_cast<double>(runs.at(policy).size());
  }
  double fastest(const std::string& policy) const {
    double lo = 1e300;
    for (const Run& r : runs.at(policy)) lo = std::min(lo, r.makespan());
    return lo;
  }
  double slowest(const std::string& policy) const {
    double hi = 0;
    for (const Run& r : runs.at(policy)) hi = std::max(hi, r.makespan());
    return hi;
  }
  // The slowest repeat's makespan over the fastest's.
  double spread(const std::string& policy) const { return slowest(policy) / fastest(policy); }
  double job_mean(const std::string& policy, size_t job) const {
    double sum = 0;
    for (const Run& r : runs.at(policy)) sum += r.report["jobs"][job]["seconds"].get<double>();
    return sum / static_cast<double>(runs.at(policy).size());
  }
  std::string label() const { return fixed(percent, 1) + "% = " + mib(static_cast<double>(budget)) + " MiB"; }
};

// `path` with `suffix` before its extension: a.svg -> a-simulated.svg.
std::string with_suffix(const std::string& path, const std::string& suffix) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// `memtrain simulate --jobs FILE --sweep` on the bench's own jobs: its
// table, the least percent any policy completes, and the arbiter's worst
// makespan over the best other policy's.
struct SimulatedSweep {
  std::string table;
  double least_percent = 100;
  double worst_ratio = 0;
  std::string worst_at;
};

SimulatedSweep simulated_sweep(const std::string& jobs_file, int points, const std::string& csv,
                               const std::string& plot) {
  run_memtrain(
      {"simulate", "--jobs", jobs_file, "--sweep", "--points", std::to_string(points), "--csv", csv, "--plot", plot},
      csv + ".log");
  // percent -> policy -> makespan (completed only); percent -> bytes
  std::map<double, std::map<std::string, double>> makespans;
  std::map<double, double> bytes;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const std::vector<std::string> c = split_csv_line(line);
    if (c.size() < 6) throw Error("jobs_bench: unexpected row in " + csv + ": " + line);
    const double percent = std::stod(c[1]);
    bytes[percent] = std::stod(c[2]);
    makespans[percent];
    if (c[3] == "1") makespans[percent][c[0]] = std::stod(c[4]);
  }
  SimulatedSweep out;
  std::ostringstream md;
  md << "| budget | static | proportional | fcfs | tensile | arbiter | arbiter / best other |\n"
        "|---|---|---|---|---|---|---|\n";
  for (const auto& [percent, by_policy] : makespans) {
    if (!by_policy.empty()) out.least_percent = std::min(out.least_percent, percent);
    md << "| " << fixed(percent, 1) << "% = " << mib(bytes[percent]) << " MiB";
    double best = 1e300;
    for (const std::string& p : kPolicies) {
      const auto it = by_policy.find(p);
      md << " | " << (it == by_policy.end() ? std::string("-") : fixed(it->second, 2));
      if (it != by_policy.end() && p != "arbiter") best = std::min(best, it->second);
    }
    const auto arbiter = by_policy.find("arbiter");
    if (arbiter != by_policy.end() && best < 1e300) {
      const double ratio = arbiter->second / best;
      if (ratio > out.worst_ratio) out.worst_ratio = ratio, out.worst_at = fixed(percent, 1) + "%";
      md << " | " << fixed(ratio, 3) << " |\n";
    } else {
      md << " | - |\n";
    }
  }
  out.table = md.str();
  return out;
}

// The measured sweep's CSV (one row per policy and budget, each policy's
// rows together) and its plot: the mean makespan of the repeats against the
// budget, one line per policy.
void write_measured_sweep(const std::vector<SweepPoint>& sweep, const std::string& csv_path,
                          const std::string& plot_path) {
  const std::string terminal = cli::gnuplot_terminal(plot_path);
  std::ofstream csv(csv_path);
  if (!csv) throw Error("jobs_bench: --csv: cannot write '" + csv_path + "'");
  csv << "policy,budget_percent,budget_bytes,completed,mean_makespan_seconds,min_makespan_seconds,"
         "max_makespan_seconds,runs\n";
  for (const std::string& p : kPolicies) {
    for (const SweepPoint& point : sweep) {
      const bool done = point.completed(p);
      csv << p << ',' << point.percent << ',' << point.budget << ',' << (done ? 1 : 0) << ','
          << (done ? std::to_string(point.mean(p)) : "") << ',' << (done ? std::to_string(point.fastest(p)) : "") << ','
          << (done ? std::to_string(point.slowest(p)) : "") << ',' << point.runs.at(p).size() << '\n';
    }
  }
  csv.close();
  cli::run_gnuplot(terminal +
                   "set datafile separator ','\n"
                   "set key top right\n"
                   "set grid\n"
                   "set xlabel 'budget (% of the sum of the jobs'' peaks)'\n"
                   "set ylabel 'measured makespan (s), mean of the repeats'\n"
                   "set title 'makespan against budget, 3 jobs on 2 cores'\n" +
                   cli::gnuplot_series_plot(csv_path, kPolicies, "$2", "$5", "$4 == 1"));
}

// The bench's work folder and its groups, numbered in the order they run.
struct Groups {
  std::string dir;
  int index = 0;
  Run run(const std::vector<std::string>& jobs, const std::string& policy, Bytes budget,
          const std::vector<std::string>& extra = {}) {
    return run_group(jobs, policy, budget, extra, dir, index++);
  }
};

// The jobs' least budgets and peaks, from a group refused at 1 byte (it calibrates, then says).
struct Probe {
  Run run;
  Bytes most_least = 0;  // the largest of the jobs' least budgets
  double peaks = 0;      // 100%: the sum of the jobs' unconstrained peaks
};

Probe probe_least(Groups& groups, const std::vector<std::string>& jobs) {
  Probe p{groups.run(jobs, "static", 1)};
  if (!p.run.report.is_object()) throw Error("jobs_bench: the probe group wrote no report (" + groups.dir + ")");
  for (const json& j : p.run.report["jobs"]) {
    p.most_least = std::max(p.most_least, j["least_budget_bytes"].get<Bytes>());
    p.peaks += j["reference_peak_bytes"].get<double>();
  }
  if (p.most_least <= 0 || p.peaks <= 0)
    throw Error("jobs_bench: the probe found no least budget (" + groups.dir + ")");
  return p;
}

// B_s: from 3x the largest least budget up in steps of 5% until `static` completes; its run there.
Run static_completing(Groups& groups, const std::vector<std::string>& jobs, Bytes most_least, Bytes& b_s) {
  b_s = 3 * most_least;
  for (int tries = 0;; ++tries) {
    Run r = groups.run(jobs, "static", b_s);
    if (r.all_completed()) return r;
    if (tries >= 12) throw Error("jobs_bench: static did not complete up to " + format_bytes(b_s));
    b_s = b_s * 105 / 100;
  }
}

// The measured sweep: `points` budgets from `least_percent` of `peaks` to
// 100%, and B_s. At each, every policy `repeats` times in turns A B C D E,
// E D C B A, ... so that drift weighs on each alike.
std::vector<SweepPoint> measured_sweep(Groups& groups, const std::vector<std::string>& jobs, double least_percent,
                                       double peaks, Bytes b_s, int points, int repeats) {
  std::vector<SweepPoint> sweep;
  for (int k = 0; k < points; ++k) {
    SweepPoint point;
    point.percent = least_percent + (100 - least_percent) * k / (points - 1);
    point.budget = static_cast<Bytes>(peaks * point.percent / 100);
    sweep.push_back(point);
  }
  SweepPoint at_bs_point;
  at_bs_point.budget = b_s;
  at_bs_point.percent = 100 * static_cast<double>(b_s) / peaks;
  sweep.push_back(at_bs_point);
  std::sort(sweep.begin(), sweep.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.budget < b.budget; });
  for (SweepPoint& point : sweep) {
    for (int r = 0; r < repeats; ++r) {
      for (const std::string& p : abba_order(kPolicies, r)) point.runs[p].push_back(groups.run(jobs, p, point.budget));
    }
  }
  return sweep;
}

// What the measured sweep's table found, for the targets.
struct SweepFindings {
  double worst_vs_best = 0, most_vs_static = 0, worst_spread = 0, worst_job = 0;
  std::string worst_vs_best_at, most_vs_static_at, worst_spread_at, worst_job_at;
  bool arbiter_everywhere = true, any_static = false;
};

// arbiter against the best other policy and against static at `point`, into `f`; returns the two cells.
std::string compare_arbiter(const SweepPoint& point, double best, const std::string& best_policy, SweepFindings& f) {
  const bool arbiter = point.completed("arbiter");
  if (!arbiter && !best_policy.empty()) f.arbiter_everywhere = false;
  std::string versus_best = "-", versus_static = "-";
  if (arbiter && !best_policy.empty()) {
    const double ratio = point.mean("arbiter") / best;
    versus_best = fixed(ratio, 3) + " (" + best_policy + ")";
    if (ratio > f.worst_vs_best)
      f.worst_vs_best = ratio, f.worst_vs_best_at = fixed(point.percent, 1) + "%, against " + best_policy;
  }
  if (arbiter && point.completed("static")) {
    f.any_static = true;
    const double ratio = point.mean("static") / point.mean("arbiter");
    versus_static = fixed(ratio, 3);
    if (ratio > f.most_vs_static) f.most_vs_static = ratio, f.most_vs_static_at = fixed(point.percent, 1) + "%";
    for (size_t j = 0; j < 3; ++j) {
      const double slower = point.job_mean("arbiter", j) / point.job_mean("static", j);
      if (slower > f.worst_job)
        f.worst_job = slower, f.worst_job_at = "job " + std::to_string(j + 1) + " at " + fixed(point.percent, 1) + "%";
    }
  }
  return versus_best + " | " + versus_static;
}

SweepFindings write_sweep_table(std::ostringstream& md, const std::vector<SweepPoint>& sweep) {
  md << "| budget | static | proportional | fcfs | tensile | arbiter | arbiter / best other | static / arbiter "
        "|\n|---|---|---|---|---|---|---|---|\n";
  SweepFindings f;
  for (const SweepPoint& point : sweep) {
    md << "| " << point.label();
    double best = 1e300;
    std::string best_policy;
    for (const std::string& p : kPolicies) {
      if (!point.completed(p)) {
        md << " | -";
        continue;
      }
      const double spread = point.spread(p);
      if (spread > f.worst_spread)
        f.worst_spread = spread, f.worst_spread_at = p + " at " + fixed(point.percent, 1) + "%";
      md << " | " << fixed(point.mean(p), 2) << " (" << fixed(spread, 2) << "x)";
      if (p != "arbiter" && point.mean(p) < best) best = point.mean(p), best_policy = p;
    }
    md << " | " << compare_arbiter(point, best, best_policy, f) << " |\n";
  }
  return f;
}

// The simulated span of each completed run (first repeat) against its measured one.
struct SimulatedAgainstMeasured {
  double worst_error = 0;
  bool every_policy = true;  // the Simulator priced every completed run
};

SimulatedAgainstMeasured write_simulated_against_measured(std::ostringstream& md, const std::string& dir,
                                                          const std::vector<SweepPoint>& sweep,
                                                          const std::vector<double>& overheads, double contention) {
  md << "| budget | policy | measured s | simulated s | simulated / measured |\n|---|---|---|---|---|\n";
  SimulatedAgainstMeasured out;
  for (const SweepPoint& point : sweep) {
    for (const std::string& p : kPolicies) {
      const Run& r = point.runs.at(p).front();
      if (!r.all_completed()) continue;
      const std::vector<json> reports = job_reports(dir, r, 3);
      const double measured = measured_span(reports);
      const double sim = simulated_span(dir, r, reports, overheads, contention);
      const double ratio = sim / measured;
      if (sim <= 0) out.every_policy = false;
      if (sim > 0) out.worst_error = std::max(out.worst_error, std::abs(ratio - 1));
      md << "| " << fixed(point.percent, 1) << "% | " << p << " | " << fixed(measured, 2) << " | "
         << (sim > 0 ? fixed(sim, 2) : std::string("failed")) << " | " << (sim > 0 ? fixed(ratio, 3) : std::string("-"))
         << " |\n";
    }
  }
  md << "\n";
  return out;
}

// 0 violations and the largest total live within the budget, every run of the sweep.
bool every_run_safe(const std::vector<SweepPoint>& sweep) {
  bool safe = true;
  for (const SweepPoint& point : sweep) {
    for (const auto& [p, rs] : point.runs) {
      for (const Run& r : rs) {
        if (!r.report.is_object()) continue;
        const json& s = r.report["summary"];
        safe = safe && s["violations"].get<long>() == 0 &&
               s["max_total_live_bytes"].get<double>() <= static_cast<double>(r.budget);
      }
    }
  }
  return safe;
}

// Why static's split costs little wherever it completes: what its jobs
// recomputed at B_s, and their largest step against their share.
std::string static_at_bs_why(const std::string& dir, const SweepPoint& bs) {
  if (!bs.completed("static")) return "";
  long recomputed = 0;
  double largest_peak = 0;
  for (const json& report : job_reports(dir, bs.runs.at("static").front(), 3)) {
    for (const json& s : planned_steps(report)) {
      if (s["recomputed_forwards"].is_number()) recomputed += s["recomputed_forwards"].get<long>();
      largest_peak = std::max(largest_peak, s["peak_bytes"].get<double>());
    }
  }
  return "; static completes only from B_s up, and there its jobs recomputed " + std::to_string(recomputed) +
         " forwards: a third of B_s, " + mib(static_cast<double>(bs.budget) / 3) +
         " MiB, holds every planned step (largest peak " + mib(largest_peak) + " MiB)";
}

// The run with the ResNet killed half way and a fourth job joining.
void write_churn_targets(std::ostringstream& md, const Run& churn, std::int64_t steps) {
  if (!churn.report.is_object()) {
    target_line(md, false, "the run with a killed and a joining job wrote its report");
    return;
  }
  const json& killed = churn.report["jobs"][1];
  const json& late = churn.report["jobs"][3];
  bool others = true;
  for (size_t j : {size_t{0}, size_t{2}, size_t{3}})
    others = others && churn.report["jobs"][j]["completed"].get<bool>();
  const double reclaim =
      killed["reclaimed_after_seconds"].is_number() ? killed["reclaimed_after_seconds"].get<double>() : 1e9;
  target_line(md, others && churn.report["summary"]["violations"].get<long>() == 0,
              "the ResNet killed (SIGKILL) after " + std::to_string(steps / 2) +
                  " steps at B_s under arbiter: the other three complete, 0 violations");
  target_line(md, reclaim <= 1.0,
              "its " + mib(killed["reclaimed_bytes"].get<double>()) +
                  " MiB reclaimed within 1 s: " + fixed(reclaim, 3) + " s after it died");
  target_line(md, late["lease_delay_steps"].is_number() && late["lease_delay_steps"].get<long>() <= 2,
              "a fourth job (the tagger, seed 2) joining after " + std::to_string(steps / 2) +
                  " group steps is leased memory within two of the others' steps: " +
                  (late["lease_delay_steps"].is_number() ? std::to_string(late["lease_delay_steps"].get<long>())
                                                         : std::string("never")));
}

// The policies' targets on the measured and simulated sweeps.
void write_policy_targets(std::ostringstream& md, const SweepFindings& f, const std::string& static_why,
                          const SweepPoint& bs, const SimulatedSweep& simulated) {
  target_line(md, f.arbiter_everywhere, "arbiter completes at every budget where another policy does");
  target_line(md, f.worst_vs_best <= 1.03,
              "arbiter at most 3% slower than the best other policy at every budget (means of the repeats): worst " +
                  fixed(f.worst_vs_best, 3) + "x, at " + f.worst_vs_best_at);
  target_line(md, f.any_static && f.most_vs_static >= 1.15,
              "arbiter at least 1.15x faster than static where memory binds most: " +
                  (f.any_static ? "at most " + fixed(f.most_vs_static, 3) + "x, at " + f.most_vs_static_at + static_why
                                : std::string("static completed nowhere")));
  target_line(md, f.any_static && f.worst_job <= 1.10,
              "no job more than 10% slower under arbiter than under static, every budget where both complete: "
              "worst " +
                  fixed(f.worst_job, 3) + "x, " + f.worst_job_at);
  target_line(md, f.worst_spread <= 1.15,
              "repeated runs of one policy at one budget at most 1.15x apart: worst " + fixed(f.worst_spread, 3) +
                  "x, " + f.worst_spread_at);
  const Run& arbiter_bs = bs.runs.at("arbiter").front();
  if (arbiter_bs.all_completed()) {
    const double jain = arbiter_bs.report["summary"]["jain_index"].get<double>();
    target_line(md, jain >= 0.9, "Jain's index at least 0.9 under arbiter at B_s: " + fixed(jain, 3));
  }
  target_line(md, simulated.worst_ratio <= 1.01,
              "simulated: arbiter at most 1% above the best other policy at every budget of the sweep where it "
              "completes: worst " +
                  fixed(simulated.worst_ratio, 3) + "x" +
                  (simulated.worst_at.empty() ? std::string() : ", at " + simulated.worst_at));
}

// The report's opening: the jobs, their least budgets and peaks, B_s, and the measured sweep's heading.
void write_opening(std::ostringstream& md, const Probe& probe, std::int64_t steps, std::int64_t batch, Bytes b_s,
                   const SweepPoint& bs, int points, int repeats) {
  md << "## Several jobs sharing one device budget (CPU)\n\n"
     << "Command: `build/bench/jobs_bench` (or `scripts/bench.sh jobs`)  \n"
     << "Machine: " << machine() << "  \n"
     << "Date: " << today() << "  \n"
     << "Jobs, each its own `memtrain train` process with default flags (the launcher gives each its share of "
        "the cores: one thread each here), "
     << steps << " steps, batch " << batch
     << ", planner mimose: the Brown tagger, the Fashion-MNIST ResNet (sides 28..112 px) and the GPT, started "
        "together under `memtrain jobs`. Least budgets at the largest inputs: ";
  for (size_t j = 0; j < probe.run.report["jobs"].size(); ++j)
    md << (j ? ", " : "") << mib(probe.run.report["jobs"][j]["least_budget_bytes"].get<double>()) << " MiB";
  md << "; unconstrained peaks: ";
  for (size_t j = 0; j < probe.run.report["jobs"].size(); ++j)
    md << (j ? ", " : "") << mib(probe.run.report["jobs"][j]["reference_peak_bytes"].get<double>()) << " MiB";
  md << " (100% is their sum, " << mib(probe.peaks)
     << " MiB). B_s, the least budget (in steps of 5% from 3x the largest least budget) at which `static` "
        "completes all three: "
     << mib(static_cast<double>(b_s)) << " MiB = " << fixed(bs.percent, 1)
     << "%: an equal split must hold the GPT's least budget three times.\n\n"
     << "### Makespan against budget, measured\n\n"
     << "Budgets from the least at which any policy completes in the simulated sweep below to 100%, " << points
     << " points, and B_s. At each, every policy " << repeats
     << " times, in turns A B C D E, E D C B A, ... Each cell: the mean makespan in seconds over the repeats "
        "and, in brackets, the slowest repeat over the fastest; '-' where a repeat was refused or a job did not "
        "complete. The bench writes these means as a CSV and a plot with a line per policy (`--csv`, "
        "`--plot`; by default `build/bench/jobs-sweep.csv` and `.svg`, and the simulated sweep's beside them "
        "as `jobs-sweep-simulated.*`).\n\n";
}

// The sections after the measured sweep: the runs at B_s, the simulated
// sweep, and the simulated runs against the measured ones.
SimulatedAgainstMeasured write_at_bs_and_simulated(std::ostringstream& md, const std::string& dir,
                                                   const std::vector<SweepPoint>& sweep, const SweepPoint& bs,
                                                   const SimulatedSweep& simulated,
                                                   const std::vector<double>& overheads, double contention) {
  md << "\n### At B_s = " << mib(static_cast<double>(bs.budget)) << " MiB, the first repeat of each policy\n\n";
  std::vector<Run> at_bs;
  for (const std::string& p : kPolicies) at_bs.push_back(bs.runs.at(p).front());
  table(md, at_bs, &at_bs[0]);
  md << "\n\"vs static\": each job's seconds over its seconds under `static`.\n\n";
  md << "### Makespan against budget, simulated\n\n"
     << "`memtrain simulate --jobs FILE --sweep` on these jobs: each job's chain, saved by the `static` run at "
        "B_s of the search above, with that run's input sizes, its time per step outside the schedule and the "
        "fitted contention (below); two compute slots. Makespan in simulated seconds of training (start-up and "
        "collection steps left out):\n\n"
     << simulated.table << "\n";
  md << "### Simulated against measured\n\n"
     << "Each completed run (first repeat) priced by `memtrain simulate --jobs` from the chains its jobs saved in that "
        "run and "
        "their planned steps' input sizes, with two compute slots (the two cores). Measured once, on the "
        "`static` run at B_s of the search for B_s: each job's time per step outside its schedule (data, "
        "planning): ";
  for (size_t j = 0; j < overheads.size(); ++j) md << (j ? ", " : "") << fixed(overheads[j], 4) << " s";
  md << "; and the slowdown of two jobs computing side by side (`contention`), fitted so that the Simulator "
        "matches that run: "
     << fixed(contention, 3)
     << ". Measured: the longest of the jobs' planned steps added up (their lease waits included; start-up and "
        "collection steps left out).\n\n";
  return write_simulated_against_measured(md, dir, sweep, overheads, contention);
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {"keep"}, "jobs_bench");
  const std::string out_path = flags.text("out", "docs/BENCHMARKS.md");
  const std::int64_t steps = flags.integer("steps", 20, 6, 10000);
  const std::int64_t batch = flags.integer("batch", 8, 1, 1024);
  const int points = static_cast<int>(flags.integer("points", 5, 2, 100));
  const int repeats = static_cast<int>(flags.integer("repeats", 4, 2, 100));
  const std::string csv_path = flags.text("csv", "build/bench/jobs-sweep.csv");
  const std::string plot_path = flags.text("plot", "build/bench/jobs-sweep.svg");
  const bool keep = flags.has("keep");  // the work folder, for a look at every run's reports
  cli::gnuplot_terminal(plot_path);     // a bad name refused before the work
  flags.check_all_used();

  char pattern[] = "/tmp/memtrain-jobs-bench-XXXXXX";
  Groups groups{::mkdtemp(pattern)};
  const std::string& dir = groups.dir;
  // Default flags: the launcher shares the cores out among the jobs.
  const std::string common = "--steps " + std::to_string(steps) + " --batch " + std::to_string(batch);
  // Each job saves its calibrated chain in its run's folder, for the group Simulator.
  const std::vector<std::string> jobs = {common + " --save-chain @RUN@/chain-1.json",
                                         common + " --model resnet --save-chain @RUN@/chain-2.json",
                                         common + " --model gpt --save-chain @RUN@/chain-3.json"};
  const Probe probe = probe_least(groups, jobs);
  Bytes b_s = 0;
  const Run static_at_bs = static_completing(groups, jobs, probe.most_least, b_s);

  // The static run at B_s measures what the Simulator does not know: each
  // job's time outside its schedule, and the slowdown side by side.
  const std::vector<double> overheads = overheads_of(job_reports(dir, static_at_bs, 3));
  const double contention = fitted_contention(dir, static_at_bs, overheads);

  // The simulated sweep of these jobs gives the measured sweep its range.
  const std::string sim_file = write_jobs_file(dir, static_at_bs.index, job_reports(dir, static_at_bs, 3), overheads,
                                               contention, dir + "/sweep.json");
  const SimulatedSweep simulated =
      simulated_sweep(sim_file, 16, with_suffix(csv_path, "-simulated"), with_suffix(plot_path, "-simulated"));
  const std::vector<SweepPoint> sweep =
      measured_sweep(groups, jobs, simulated.least_percent, probe.peaks, b_s, points, repeats);
  const SweepPoint& bs =
      *std::find_if(sweep.begin(), sweep.end(), [&](const SweepPoint& p) { return p.budget == b_s; });

  // Kill the ResNet half way; a second tagger joins after as many group steps.
  std::vector<std::string> churn_jobs = jobs;
  churn_jobs.push_back(common + " --seed 2");
  const Run churn =
      groups.run(churn_jobs, "arbiter", b_s,
                 {"--kill-after", "2:" + std::to_string(steps / 2), "--start-after", "4:" + std::to_string(steps / 2)});
  write_measured_sweep(sweep, csv_path, plot_path);

  std::ostringstream md;
  write_opening(md, probe, steps, batch, b_s, bs, points, repeats);
  const SweepFindings findings = write_sweep_table(md, sweep);
  const SimulatedAgainstMeasured priced =
      write_at_bs_and_simulated(md, dir, sweep, bs, simulated, overheads, contention);
  target_line(md, every_run_safe(sweep),
              "0 violations and largest total live within the budget, every policy, every run");
  write_policy_targets(md, findings, static_at_bs_why(dir, bs), bs, simulated);
  write_churn_targets(md, churn, steps);
  target_line(md, priced.every_policy && priced.worst_error <= 0.10,
              "simulated training span within 10% of measured, every completed run of the sweep: worst " +
                  fixed(100 * priced.worst_error, 1) + "%");
  if (keep) {
    std::fprintf(stderr, "jobs_bench: kept %s\n", dir.c_str());
  } else {
    std::system(("rm -rf '" + dir + "'").c_str());
  }
  publish("jobs_bench", md.str(), out_path);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) { return memtrain::bench::bench_main("jobs_bench", memtrain::bench::run, argc, argv); }
