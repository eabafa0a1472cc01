// Profiling a memory method at one batch size, for PAPAYA's model: a fresh
// trainer on the dataset's largest input at that batch size runs warm-up
// steps, then timed steps; the result is the median step time and the
// highest measured peak (optimizer update included).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plan/planner.h"
#include "predict/measurement.h"
#include "runtime/input/batch_source.h"
#include "runtime/model/adam.h"
#include "runtime/training/trainer.h"

namespace memtrain::runtime {

// A method memtrain can run, by the name the measurements carry:
//   none              keep everything
//   checkpoint        recompute with the default checkpoint planner
//   checkpoint:P      recompute with planner P
// Checkpointing runs at `budget` when given, else at the planner's least
// budget for the input (its most memory-saving setting).
struct ProfileMethod {
  std::string name;
  std::string planner;
  std::optional<BudgetSpec> budget;
};

// Methods named in the issue that memtrain does not have yet, with why.
std::optional<std::string> unbuilt_method(const std::string& name);

// Parses a method name; UsageError naming the name and the valid forms.
ProfileMethod parse_profile_method(const std::string& name, const std::string& default_planner,
                                   const std::optional<BudgetSpec>& budget);

struct ProfileOptions {
  int warmup_steps = 1;
  int timed_steps = 3;
  std::uint64_t seed = 1;
  std::string device = "cpu";
  plan::PlannerOptions planner_options;
  AdamOptions adam;
  // Data parallelism: this process is one rank (not owned); every rank runs
  // the same input and sums its gradients with the others', and a timed
  // step counts as long as the slowest rank's.
  RankGroup* ranks = nullptr;
};

struct ProfilePoint {
  predict::Measurement measurement;
  std::string signature;               // the input's shape, e.g. 32x64
  std::vector<Seconds> timed_seconds;  // every timed step
  Bytes budget_bytes = 0;              // what the planner planned against
};

using SourceFactory = std::function<std::unique_ptr<BatchSource>(std::int64_t batch)>;

ProfilePoint profile_batch(const ProfileMethod& method, std::int64_t batch, const Trainer::ModelFactory& model,
                           const SourceFactory& sources, const ProfileOptions& options);

}  // namespace memtrain::runtime
