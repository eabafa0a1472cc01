#include "cli/train_report.h"

namespace memtrain::cli {

nlohmann::json train_report(const runtime::Trainer& trainer, const RunInfo& info) {
  using nlohmann::json;
  json steps = json::array();
  for (const runtime::StepRecord& r : trainer.records()) {
    steps.push_back({{"step", r.step},
                     {"epoch", r.epoch},
                     {"input_size", r.signature.size},
                     {"input_shape", r.signature.shape},
                     {"plan", r.plan},
                     {"schedule", r.schedule},
                     {"recomputed_forwards", r.recomputed_forwards},
                     {"predicted_peak_bytes", r.predicted_peak_bytes >= 0 ? json(r.predicted_peak_bytes) : json()},
                     {"peak_bytes", r.peak_bytes},
                     {"violation", r.violation},
                     {"retries", r.retries},
                     {"seconds", r.seconds},
                     {"planning_seconds", r.planning_seconds},
                     {"data_wait_seconds", r.data_wait_seconds},
                     {"schedule_seconds", r.schedule_seconds},
                     {"predicted_schedule_seconds",
                      r.predicted_schedule_seconds >= 0 ? json(r.predicted_schedule_seconds) : json()},
                     {"swap_bytes", r.swap_bytes},
                     {"to_host_bytes", r.to_host_bytes},
                     {"to_device_bytes", r.to_device_bytes},
                     {"weight_swap_bytes", r.weight_swap_bytes},
                     {"transfer_seconds", r.transfer_seconds},
                     {"to_host_seconds", r.to_host_seconds},
                     {"to_device_seconds", r.to_device_seconds},
                     {"stall_seconds", r.stall_seconds},
                     {"loss", r.loss},
                     {"accuracy", r.accuracy}});
  }
  const runtime::TrainSummary s = trainer.summary();
  return {{"budget_bytes", s.budget_bytes},
          {"planner", trainer.planner().name()},
          {"model", info.model},
          {"data", info.data},
          {"device", info.device},
          {"seed", info.seed},
          {"cpu_threads", info.cpu_threads},
          {"blas_library", info.blas_library.empty() ? nlohmann::json() : nlohmann::json(info.blas_library)},
          {"weights_on_host", trainer.weights_on_host()},
          {"micro_batches", trainer.micro_batches()},
          {"reference_peak_bytes", s.reference_peak_bytes},
          {"largest_input_shape", trainer.largest_signature().shape},
          {"input_pipeline", info.input_pipeline},
          {"steps", steps},
          {"summary",
           {{"steps", s.steps},
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
            {"swap_bytes_per_step", s.swap_bytes_per_step},
            {"to_host_bytes_per_step", s.to_host_bytes_per_step},
            {"to_device_bytes_per_step", s.to_device_bytes_per_step},
            {"weight_swap_bytes_per_step", s.weight_swap_bytes_per_step},
            {"hidden_transfer_fraction", s.hidden_transfer_fraction},
            {"median_time_prediction_error", s.median_time_prediction_error},
            {"to_host_bandwidth", s.to_host_bandwidth},
            {"to_device_bandwidth", s.to_device_bandwidth},
            {"mean_new_plan_seconds", s.mean_new_plan_seconds},
            {"mean_cached_plan_seconds", s.mean_cached_plan_seconds}}}};
}

}  // namespace memtrain::cli
