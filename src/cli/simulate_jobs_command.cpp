// `memtrain simulate --jobs FILE --policy P --budget B`: several jobs on one
// device priced by the group Simulator (group_sim), with the report fields
// of `memtrain jobs`.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/json_file.h"
#include "core/error.h"
#include "group_sim/group_simulator.h"

namespace memtrain::cli {

namespace {

nlohmann::json or_null(bool known, double value) { return known ? nlohmann::json(value) : nlohmann::json(); }

}  // namespace

int run_simulate_jobs(const std::vector<std::string>& args) {
  Flags flags(args, {}, "simulate --jobs");
  const std::string path = flags.text("jobs", "");
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
