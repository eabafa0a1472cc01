// What a Trainer is asked to do, and the rules between its options: one
// function (check_trainer_options) that the Trainer runs on construction and
// the CLI runs on its flags before it loads data or starts ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/units.h"
#include "plan/planner.h"
#include "runtime/comm/rank_group.h"
#include "runtime/model/adam.h"
#include "runtime/step/step_lease.h"
#include "runtime/step/step_planner.h"

namespace memtrain::runtime {

struct TrainerOptions {
  std::string planner = "mimose";
  plan::PlannerOptions planner_options;  // slots of the planners that discretise memory
  BudgetSpec budget = {true, 50.0, 0};   // default: 50% of the largest input's unconstrained peak
  // Instead of `budget`: the least budget the planner needs for the largest
  // input (for planners that ignore budgets, their schedule's simulated peak).
  bool least_budget = false;
  int collect_steps = 4;    // K: steps with every stage checkpointed, 0..kMaxCollectSteps
  std::int64_t bucket = 0;  // plan-cache bucket width in signature size; 0: largest / 64
  double margin = 0.10;     // safety margin on memory for sizes outside the observed range, 0..kMaxMargin
  std::uint64_t seed = 1;
  AdamOptions adam;
  bool enforce = true;  // enforce the budget (planners that respect it)
  int max_retries = 8;  // stricter re-plans of one step before giving up
  // Fault injection for tests: the chain planners see has its memory fields
  // multiplied by this, so < 1 makes plans that run out of budget.
  double prediction_scale = 1.0;
  // The host link the planners may offload over (bytes/s; 0: none): from
  // `memtrain calibrate` or --bandwidth.
  double device_to_host_bandwidth = 0;
  double host_to_device_bandwidth = 0;
  // Refine that link from each step's own copies (predict::LinkEstimate)
  // for the plans and predictions that follow; false keeps the given one.
  bool refine_link = true;
  // Weights, gradients and Adam state in host memory, swapped in by the
  // schedule (planners swap and swap-naive); a step then runs in
  // `micro_batches` micro-batches, split by rows (schedules name them).
  // With the weights on the device, micro-batches are plain gradient
  // accumulation: the step's schedule runs once per micro-batch.
  bool weights_on_host = false;
  int micro_batches = 1;
  // Data parallelism: this process is one rank of `ranks` (not owned), and
  // the batch source gives this rank's slice of each global batch
  // (RankSliceBatches). Gradients are summed over the ranks before the update.
  RankGroup* ranks = nullptr;
  // Sum the ranks' gradients in rank order: slower, and bit for bit one
  // process running the ranks' slices as micro-batches.
  bool deterministic_reduce = false;
  // Sum each gradient bucket as soon as the backward has made it final,
  // beside the rest of the backward (when the budget leaves room for the
  // sums' copies beside the largest input's plan); false: after the backward.
  bool sum_beside_backward = true;
  // ZeRO-1: each rank keeps Adam's moments for 1/ranks of the weights'
  // elements and updates those; the ranks then share the updated weights.
  // Bit for bit the unsharded update.
  bool shard_optimizer = false;
  // A device shared with other jobs: each step's budget is leased from it
  // (`budget` and `least_budget` are then the group's business). Calibration
  // runs only frugal schedules and simulates the unconstrained peak.
  StepLease* lease = nullptr;
  // The run saves or resumes checkpoints (which keep the weights on the device).
  bool checkpoints = false;
};

// The modes a run combines, as every front end knows them before anything
// starts (the CLI before it loads data or starts ranks).
enum class TrainingMode { Ranks, SharedDevice, WeightsOnHost, ShardOptimizer, DeterministicReduce, Checkpoints };
struct TrainingModes {
  bool ranks = false;          // data parallelism
  bool shared_device = false;  // a job of a group leasing its budget
  bool weights_on_host = false;
  bool shard_optimizer = false;
  bool deterministic_reduce = false;
  bool checkpoints = false;
};
TrainingModes modes_of(const TrainerOptions& options);
// A mode that needs another one, or cannot go with it, and why.
struct ModeRule {
  TrainingMode mode;
  TrainingMode other;
  bool needs_other;  // else: not with the other
  std::string why;
};
// The first rule the modes break, if any: the rules are in one place for
// every front end and the Trainer.
std::optional<ModeRule> broken_mode_rule(const TrainingModes& modes);
// A mode in words ("a sharded optimizer"); a front end's own namer adds how
// its users ask for it.
std::string mode_in_words(TrainingMode mode);
std::string describe(const ModeRule& rule, const std::function<std::string(TrainingMode)>& name = mode_in_words);
// Throws UsageError describing the first rule the modes break.
void check_training_modes(const TrainingModes& modes);
// Every rule on TrainerOptions: the step planner's ranges, the modes, and
// what the weights' placement needs (a planner that can plan it, the link).
void check_trainer_options(const TrainerOptions& options);
// The step planner's part of the options.
StepPlannerOptions step_planner_options(const TrainerOptions& options);

}  // namespace memtrain::runtime
