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
  // How steps are planned: the planner, its options, the collection steps,
  // the plan cache, the margin, the retries, the host link (StepPlanner's
  // options, declared there once; micro_batches below sets its planner's).
  StepPlannerOptions steps;
  BudgetSpec budget = {true, 50.0, 0};  // default: 50% of the largest input's unconstrained peak
  // Instead of `budget`: the least budget the planner needs for the largest
  // input (for planners that ignore budgets, their schedule's simulated peak).
  bool least_budget = false;
  std::uint64_t seed = 1;
  AdamOptions adam;
  bool enforce = true;  // enforce the budget (planners that respect it)
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
// The step planner's options: `steps`, with its planner's micro-batches the run's.
StepPlannerOptions step_planner_options(const TrainerOptions& options);

}  // namespace memtrain::runtime
