#include "cli/group_report_json.h"

namespace memtrain::cli {

namespace {

using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json();
}

json job_json(const jobs::JobFigures& f) {
  const jobs::JobOutcome& out = f.outcome;
  const jobs::MemberState* m = f.member ? &*f.member : nullptr;
  json j = {
      {"index", f.index},
      {"pid", out.pid},
      {"label", m ? m->label : std::string()},
      {"completed", f.completed},
      {"exit_code", out.signal ? json() : json(out.exit_code)},
      {"signal", out.signal ? json(out.signal) : json()},
      {"error", out.error.empty() ? json() : json(out.error)},
      {"seconds", or_null(f.seconds)},
      {"started_seconds", out.launched ? json(out.started) : json()},
      {"steps", m ? m->steps : 0},
      {"wait_seconds", m ? m->wait_seconds : 0},
      {"calibrate_wait_seconds", m ? m->calibrate_wait_seconds : 0},
      {"peak_bytes", m ? m->peak : 0},
      {"reference_peak_bytes", m ? m->reference : 0},
      {"least_budget_bytes", m ? m->least_largest : 0},
      {"reclaimed_bytes", m ? m->reclaimed : 0},
      {"tensile_replans", m ? m->replans : 0},
      {"arbiter_choices", m ? json(m->arbiter_choices) : json::object()},
      {"reclaimed_after_seconds", out.reclaimed_after >= 0 ? json(out.reclaimed_after) : json()},
      {"lease_delay_steps", m && m->others_steps_to_first_lease >= 0 ? json(m->others_steps_to_first_lease) : json()}};
  if (f.args) j["args"] = *f.args;
  j["threads"] = or_null(f.threads);
  j["samples_per_second"] = or_null(f.samples_per_second);
  j["retries"] = or_null(f.retries);
  j["msr"] = or_null(f.msr);
  j["eor"] = or_null(f.eor);
  j["cbr"] = or_null(f.cbr);
  return j;
}

}  // namespace

json group_report_json(const jobs::GroupReport& r) {
  json jobs = json::array();
  for (const jobs::JobFigures& f : r.jobs) jobs.push_back(job_json(f));
  return {{"budget_bytes", r.budget},
          {"policy", jobs::policy_name(r.policy)},
          {"group", r.group},
          {"compute_slots", r.compute_slots},
          {"summary",
           {{"makespan_seconds", r.makespan},
            {"violations", r.violations},
            {"max_total_live_bytes", r.max_total_live},
            {"calibration_max_total_live_bytes", r.calibration_max_total_live},
            {"jain_index", or_null(r.jain_index)},
            {"refusals", r.refusals},
            {"refused", r.refused.empty() ? json() : json(r.refused)}}},
          {"jobs", jobs}};
}

}  // namespace memtrain::cli
