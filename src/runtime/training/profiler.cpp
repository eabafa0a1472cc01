#include "runtime/training/profiler.h"

#include <algorithm>

#include "core/error.h"
#include "plan/registry.h"
#include "runtime/input/largest_input_batches.h"

namespace memtrain::runtime {

std::optional<std::string> unbuilt_method(const std::string& name) {
  if (name == "offload") return std::string("offload is not built yet (the offload and swap issue)");
  if (name == "compress") return std::string("compress is not built yet (no lossy activation compression in memtrain)");
  return std::nullopt;
}

ProfileMethod parse_profile_method(const std::string& name, const std::string& default_planner,
                                   const std::optional<BudgetSpec>& budget) {
  const std::string valid = "expected none, checkpoint or checkpoint:PLANNER";
  ProfileMethod m;
  m.name = name;
  if (name == "none") {
    m.planner = "none";
    return m;
  }
  if (name == "checkpoint") {
    m.planner = default_planner;
  } else if (name.rfind("checkpoint:", 0) == 0) {
    m.planner = name.substr(11);
  } else {
    throw UsageError("method '" + name + "' is unknown; " + valid);
  }
  if (m.planner == "none") throw UsageError("method '" + name + "' checkpoints nothing; use the method none");
  plan::planner_traits(m.planner);  // an unknown planner names the known ones
  m.budget = budget;
  return m;
}

ProfilePoint profile_batch(const ProfileMethod& method, std::int64_t batch, const Trainer::ModelFactory& model,
                           const SourceFactory& sources, const ProfileOptions& options) {
  if (batch < 1) throw UsageError("batch " + std::to_string(batch) + " is out of range; expected >= 1");
  if (options.timed_steps < 1) throw UsageError("timed steps must be >= 1");
  std::unique_ptr<DeviceMemory> memory = make_device_memory(options.device);
  LargestInputBatches source(sources(batch));
  TrainerOptions o;
  o.steps.planner = method.planner;
  o.steps.planner_options = options.planner_options;
  o.least_budget = !method.budget.has_value();
  if (method.budget) o.budget = *method.budget;
  // One size only: calibration has measured it, nothing is left to learn.
  o.steps.collect_steps = 0;
  o.seed = options.seed;
  o.adam = options.adam;
  // A measurement, not a guarantee: the peak is recorded, not enforced.
  o.enforce = false;
  o.ranks = options.ranks;
  Trainer trainer(o, *memory, model, source);
  trainer.calibrate();
  for (int s = 0; s < options.warmup_steps; ++s) trainer.step();

  ProfilePoint p;
  p.budget_bytes = trainer.budget_bytes();
  Bytes peak = 0;
  for (int s = 0; s < options.timed_steps; ++s) {
    const StepRecord r = trainer.step();
    p.timed_seconds.push_back(r.seconds);
    if (options.ranks) {
      for (const std::vector<double>& theirs : options.ranks->gather({r.seconds}))
        p.timed_seconds.back() = std::max(p.timed_seconds.back(), theirs[0]);
    }
    peak = std::max(peak, r.peak_bytes);
    p.signature = r.signature.describe();
  }
  std::vector<Seconds> sorted = p.timed_seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const Seconds median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  p.measurement = {method.name, batch, peak, median};
  return p;
}

}  // namespace memtrain::runtime
