#include "cli/train_report.h"

#include <fstream>

#include "cli/copy_stats_json.h"
#include "core/fnv1a.h"

namespace memtrain::cli {

std::string parameter_digest(runtime::StagedModel& model) {
  Fnv1a h;
  for (const torch::Tensor& p : model.parameters()) {
    const torch::Tensor c = p.detach().cpu().contiguous();
    h.add(c.data_ptr(), c.nbytes());
  }
  return hex_digest(h.value());
}

namespace {

using nlohmann::json;

json step_json(const runtime::StepRecord& r) {
  json step = {
      {"step", r.step},
      {"epoch", r.epoch},
      {"input_size", r.signature.size},
      {"input_shape", r.signature.shape},
      {"plan", runtime::plan_kind_name(r.plan)},
      {"schedule", r.schedule.to_string()},
      {"recomputed_forwards", r.recomputed_forwards},
      {"predicted_peak_bytes", r.predicted_peak_bytes >= 0 ? json(r.predicted_peak_bytes) : json()},
      {"peak_bytes", r.peak_bytes},
      {"budget_bytes", r.budget_bytes},
      {"violation", r.violation},
      {"retries", r.retries},
      {"seconds", r.seconds},
      {"planning_seconds", r.planning_seconds},
      {"synchronizations", r.synchronizations},
      {"data_wait_seconds", r.data_wait_seconds},
      {"schedule_seconds", r.schedule_seconds},
      {"predicted_schedule_seconds", r.predicted_schedule_seconds >= 0 ? json(r.predicted_schedule_seconds) : json()},
      {"reduce_seconds", r.reduce.seconds},
      {"reduce_stall_seconds", r.reduce.stall_seconds},
      {"predicted_reduce_stall_seconds",
       r.predicted_reduce_stall_seconds >= 0 ? json(r.predicted_reduce_stall_seconds) : json()},
      {"share_seconds", r.share_seconds},
      {"loss", r.loss},
      {"accuracy", r.accuracy}};
  if (r.predicted_plain_seconds >= 0) {  // a shared device
    step["lease_wait_seconds"] = r.lease_wait_seconds;
    step["lease_want_bytes"] = r.lease_want_bytes;
    step["lease_least_bytes"] = r.lease_least_bytes;
    step["predicted_plain_seconds"] = r.predicted_plain_seconds;
    step["predicted_plain_peak_bytes"] = r.predicted_plain_peak_bytes;
  }
  add_copy_stats(step, r.copies);
  return step;
}

json summary_json(const runtime::TrainSummary& s) {
  json summary = {{"steps", s.steps},
                  {"max_peak_bytes", s.max_peak_bytes},
                  {"violations", s.violations},
                  {"retries", s.retries},
                  {"cache_hits", s.cache_hits},
                  {"cache_misses", s.cache_misses},
                  {"median_prediction_error", s.median_prediction_error},
                  {"max_prediction_error", s.max_prediction_error},
                  {"predictor_fit_error", s.predictor_fit_error},
                  {"mean_step_seconds", s.mean_step_seconds},
                  {"data_wait_seconds", s.data_wait_seconds},
                  {"data_wait_fraction", s.data_wait_fraction},
                  {"resident_bytes", s.resident_bytes},
                  {"collection_steps", s.collection_steps},
                  {"median_time_prediction_error", s.median_time_prediction_error},
                  {"to_host_bandwidth", s.to_host_bandwidth},
                  {"to_device_bandwidth", s.to_device_bandwidth},
                  {"mean_new_plan_seconds", s.mean_new_plan_seconds},
                  {"mean_cached_plan_seconds", s.mean_cached_plan_seconds},
                  {"lease_wait_seconds", s.lease_wait_seconds},
                  {"optimizer_state_bytes", s.optimizer_state_bytes}};
  // Copy figures over the planned steps: collection steps swap everything whatever the planner.
  const CopyStats& c = s.planned_copies;
  summary["swap_bytes_per_step"] = s.per_planned_step(c.bytes());
  summary["to_host_bytes_per_step"] = s.per_planned_step(c.to_host_bytes);
  summary["to_device_bytes_per_step"] = s.per_planned_step(c.to_device_bytes);
  summary["weight_swap_bytes_per_step"] = s.per_planned_step(c.weight_bytes);
  summary["hidden_transfer_fraction"] = c.hidden_fraction();
  summary["to_host_hidden_fraction"] = c.hidden_fraction(CopyDirection::ToHost);
  summary["to_device_hidden_fraction"] = c.hidden_fraction(CopyDirection::ToDevice);
  // Ranks: the gradient sums over the planned steps, and how much of them the backward hid.
  summary["reduce_seconds_per_step"] =
      s.steps > s.collection_steps ? s.planned_reduce.seconds / static_cast<double>(s.steps - s.collection_steps) : 0.0;
  summary["reduce_hidden_fraction"] = s.planned_reduce.hidden_fraction();
  return summary;
}

}  // namespace

nlohmann::json train_report(const runtime::Trainer& trainer, const RunInfo& info) {
  json steps = json::array();
  for (const runtime::StepRecord& r : trainer.records()) steps.push_back(step_json(r));
  const runtime::TrainSummary s = trainer.summary();
  json report = {{"budget_bytes", s.budget_bytes},
                 {"planner", trainer.planner().name()},
                 {"model", info.model},
                 {"data", info.data},
                 {"device", info.device},
                 {"seed", info.seed},
                 {"cpu_threads", info.cpu_threads},
                 {"blas_library", info.blas_library},
                 {"weights_on_host", trainer.weights_on_host()},
                 {"micro_batches", trainer.micro_batches()},
                 {"rank", info.rank},
                 {"world", info.world},
                 {"deterministic_reduce", info.deterministic_reduce},
                 {"sums_beside_backward", trainer.sums_beside_backward()},
                 {"shard_optimizer", info.shard_optimizer},
                 {"parameter_digest", parameter_digest(const_cast<runtime::Trainer&>(trainer).model())},
                 {"reference_peak_bytes", s.reference_peak_bytes},
                 {"largest_input_shape", trainer.largest_signature().shape},
                 {"largest_input_size", trainer.largest_signature().size},
                 {"input_pipeline", info.input_pipeline},
                 {"steps", steps},
                 {"summary", summary_json(s)}};
  return report;
}

std::optional<jobs::JobRunReport> read_job_run_report(const std::string& path) {
  using nlohmann::json;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const auto number = [](const json& j, const char* key) -> std::optional<double> {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
  };
  try {
    const json report = json::parse(in);
    jobs::JobRunReport r;
    if (report.contains("cpu_threads")) r.threads = report.at("cpu_threads").get<std::int64_t>();
    for (const json& step : report.at("steps")) {
      jobs::JobRunReport::Step s;
      s.collection = step.at("plan") == "collect";
      const json& shape = step.at("input_shape");
      s.samples = shape.empty() ? 1 : shape.at(0).get<double>();
      s.peak_bytes = step.at("peak_bytes").get<double>();
      s.predicted_plain_peak_bytes = number(step, "predicted_plain_peak_bytes");
      s.predicted_plain_seconds = number(step, "predicted_plain_seconds");
      s.predicted_schedule_seconds = number(step, "predicted_schedule_seconds");
      r.steps.push_back(s);
    }
    r.retries = report.at("summary").at("retries").get<long>();
    r.violations = report.at("summary").at("violations").get<long>();
    return r;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace memtrain::cli
