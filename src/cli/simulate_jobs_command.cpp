// `memtrain simulate --jobs FILE --policy P --budget B`: several jobs on one
// device priced by the group Simulator (group_sim), with the report fields
// of `memtrain jobs`. With --sweep: every policy's makespan over budgets from
// the least at which any policy completes the group to 100%.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/gnuplot.h"
#include "cli/json_file.h"
#include "core/error.h"
#include "group_sim/group_simulator.h"

namespace memtrain::cli {

namespace {

nlohmann::json or_null(bool known, double value) { return known ? nlohmann::json(value) : nlohmann::json(); }

constexpr jobs::Policy kAllPolicies[] = {jobs::Policy::Static, jobs::Policy::Proportional, jobs::Policy::Fcfs,
                                         jobs::Policy::Tensile, jobs::Policy::Arbiter};

BudgetSpec percent_budget(double percent) {
  BudgetSpec b;
  b.is_percent = true;
  b.percent = percent;
  return b;
}

// The group ran to its end: not refused, every job completed.
bool completes(const group_sim::GroupOutcome& g) {
  return g.refused.empty() &&
         std::all_of(g.jobs.begin(), g.jobs.end(), [](const group_sim::SimJobOutcome& j) { return j.completed; });
}

// The least percent (to 0.25) at which `policy` completes the group; 0 when
// not even 100% does.
double least_completing_percent(const group_sim::GroupSpec& spec, jobs::Policy policy) {
  if (!completes(group_sim::simulate_group(spec, policy, percent_budget(100)))) return 0;
  double lo = 0, hi = 100;  // lo fails (or is 0), hi completes
  while (hi - lo > 0.25) {
    const double mid = (lo + hi) / 2;
    (completes(group_sim::simulate_group(spec, policy, percent_budget(mid))) ? hi : lo) = mid;
  }
  return hi;
}

int run_sweep(Flags& flags, const std::string& path) {
  const int points = static_cast<int>(flags.integer("points", 16, 2, 1000));
  const std::string csv_path = flags.text("csv", "jobs-sweep.csv");
  const std::string plot_path = flags.text("plot", "jobs-sweep.svg");
  const std::string terminal = gnuplot_terminal(plot_path);  // reject a bad name before the work
  flags.check_all_used();

  const group_sim::GroupSpec spec = group_sim::read_group_file(path);
  double least = 100;
  for (jobs::Policy p : kAllPolicies) {
    const double l = least_completing_percent(spec, p);
    if (l > 0) least = std::min(least, l);
  }
  std::ofstream csv(csv_path);
  if (!csv) throw Error("--csv: cannot write '" + csv_path + "'");
  csv << "policy,budget_percent,budget_bytes,completed,makespan_seconds,violations\n";
  std::map<jobs::Policy, std::string> rows;  // each policy's CSV rows, written one policy after another
  std::printf("makespan (simulated seconds) per policy; '-' where the group is refused or a job cannot complete\n");
  std::printf("%8s %12s", "budget", "bytes");
  for (jobs::Policy p : kAllPolicies) std::printf(" %12s", jobs::policy_name(p));
  std::printf(" %18s\n", "arbiter/best other");
  double worst_ratio = 0;
  for (int k = 0; k < points; ++k) {
    const double percent = least + (100 - least) * k / (points - 1);
    std::map<jobs::Policy, double> makespan;
    Bytes bytes = 0;
    std::string row;
    for (jobs::Policy p : kAllPolicies) {
      const group_sim::GroupOutcome g = group_sim::simulate_group(spec, p, percent_budget(percent));
      bytes = g.budget;
      const bool done = completes(g);
      if (done) makespan[p] = g.makespan;
      char cell[32];
      if (done) {
        std::snprintf(cell, sizeof cell, " %12.3f", g.makespan);
      } else {
        std::snprintf(cell, sizeof cell, " %12s", "-");
      }
      row += cell;
      std::ostringstream row;
      row << jobs::policy_name(p) << ',' << percent << ',' << g.budget << ',' << (done ? 1 : 0) << ','
          << (done ? std::to_string(g.makespan) : "") << ',' << g.violations << '\n';
      rows[p] += row.str();
    }
    double best_other = std::numeric_limits<double>::infinity();
    for (const auto& [p, m] : makespan) {
      if (p != jobs::Policy::Arbiter) best_other = std::min(best_other, m);
    }
    std::string ratio = "-";
    if (makespan.count(jobs::Policy::Arbiter) && best_other < std::numeric_limits<double>::infinity()) {
      const double r = makespan[jobs::Policy::Arbiter] / best_other;
      worst_ratio = std::max(worst_ratio, r);
      char text[32];
      std::snprintf(text, sizeof text, "%.3f", r);
      ratio = text;
    }
    std::printf("%7.2f%% %12s%s %18s\n", percent, format_bytes(bytes).c_str(), row.c_str(), ratio.c_str());
  }
  for (jobs::Policy p : kAllPolicies) csv << rows[p];
  csv.close();
  std::printf(
      "least budget any policy completes: %.2f%%; arbiter's makespan at most %.3fx the best other "
      "policy's over the sweep\n",
      least, worst_ratio);
  std::vector<std::string> names;
  for (jobs::Policy p : kAllPolicies) names.emplace_back(jobs::policy_name(p));
  std::string script = terminal +
                       "set datafile separator ','\n"
                       "set key top right\n"
                       "set grid\n"
                       "set xlabel 'budget (% of the sum of the jobs'' peaks)'\n"
                       "set ylabel 'simulated makespan (s)'\n"
                       "set title 'makespan against budget, " +
                       std::to_string(spec.jobs.size()) + " jobs'\n" +
                       gnuplot_series_plot(csv_path, names, "$2", "$5", "$4 == 1");
  run_gnuplot(script);
  std::printf("wrote %s and %s\n", csv_path.c_str(), plot_path.c_str());
  return 0;
}

}  // namespace

int run_simulate_jobs(const std::vector<std::string>& args) {
  Flags flags(args, {"sweep"}, "simulate --jobs");
  const std::string path = flags.text("jobs", "");
  if (flags.has("sweep")) {
    for (const char* other : {"policy", "budget", "json"}) {
      if (flags.has(other))
        throw UsageError(std::string("simulate --jobs --sweep runs every policy at many budgets; drop --") + other);
    }
    return run_sweep(flags, path);
  }
  if (!flags.has("policy"))
    throw UsageError(std::string("simulate --jobs: --policy is required; expected ") + jobs::kPolicyNames);
  if (!flags.has("budget")) throw UsageError("simulate --jobs: --budget is required (bytes, or N% of the jobs' peaks)");
  const jobs::Policy policy = jobs::parse_policy(flags.text("policy", ""));
  const BudgetSpec budget = parse_budget(flags.text("budget", ""), "--budget");
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  const group_sim::GroupSpec spec = group_sim::read_group_file(path);
  const group_sim::GroupOutcome g = group_sim::simulate_group(spec, policy, budget);

  std::printf("policy %s, budget %s, %zu jobs: ", jobs::policy_name(policy), format_bytes(g.budget).c_str(),
              g.jobs.size());
  if (!g.refused.empty()) {
    std::printf("refused: %s\n", g.refused.c_str());
  } else {
    std::printf("makespan %.3f s, %lld violations, largest total live %s, Jain %.3f\n", g.makespan,
                static_cast<long long>(g.violations), format_bytes(g.max_total_live).c_str(), g.jain);
    std::printf("%-4s %-28s %-9s %6s %10s %10s %11s %7s %7s\n", "job", "label", "completed", "steps", "seconds",
                "wait s", "peak", "msr", "eor");
    for (size_t k = 0; k < g.jobs.size(); ++k) {
      const group_sim::SimJobOutcome& j = g.jobs[k];
      std::printf("%-4zu %-28.28s %-9s %6lld %10.3f %10.3f %11s %7.3f %7.3f\n", k + 1, j.label.c_str(),
                  j.completed ? "yes" : "no", static_cast<long long>(j.steps), j.seconds, j.wait_seconds,
                  format_bytes(j.peak_bytes).c_str(), j.msr, j.eor);
      if (!j.error.empty()) std::printf("     %s\n", j.error.c_str());
    }
  }
  if (!json_path.empty()) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const group_sim::SimJobOutcome& j : g.jobs) {
      jobs.push_back({{"label", j.label},
                      {"completed", j.completed},
                      {"error", j.error.empty() ? nlohmann::json() : nlohmann::json(j.error)},
                      {"steps", j.steps},
                      {"started_seconds", j.start},
                      {"seconds", j.seconds},
                      {"plain_seconds", j.plain_seconds},
                      {"wait_seconds", j.wait_seconds},
                      {"peak_bytes", j.peak_bytes},
                      {"reference_peak_bytes", j.reference},
                      {"least_budget_bytes", j.least_largest},
                      {"retries", 0},
                      {"tensile_replans", j.tensile_replans},
                      {"arbiter_choices", j.arbiter_choices},
                      {"msr", j.msr},
                      {"eor", j.eor},
                      {"cbr", or_null(j.eor > 0, j.eor > 0 ? j.msr / j.eor : 0)}});
    }
    write_json_file({{"budget_bytes", g.budget},
                     {"policy", jobs::policy_name(policy)},
                     {"simulated", true},
                     {"summary",
                      {{"makespan_seconds", g.makespan},
                       {"violations", g.violations},
                       {"max_total_live_bytes", g.max_total_live},
                       {"jain_index", g.jain},
                       {"refused", g.refused.empty() ? nlohmann::json() : nlohmann::json(g.refused)}}},
                     {"jobs", jobs}},
                    json_path);
  }
  return g.refused.empty() ? 0 : 1;
}

}  // namespace memtrain::cli
