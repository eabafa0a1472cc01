// The Mimose loop (choosing, retrying and learning from each step's plan)
// is the StepPlanner's (step_planner.h), and one step's life around it the
// PlannedStep's (planned_step.h), both shared with the Python module; the
// trainer adds its optimizer and its modes (ranks, a shared device, weights
// in host memory), each an object it owns, which decides that mode's part
// of a step. Before the first step it calibrates on the dataset's largest
// input: the unconstrained peak (for budgets given as N%) and one fully
// measured chain.
//
// A step that still runs out of budget (a misprediction) loses nothing: its
// partial gradients are discarded, the random generators rewound, the
// batch-norm statistics restored (its StepGuard's StepRollback), the plan
// marked bad, and the same batch runs again under a stricter plan. The
// optimizer update runs only after a step's backward has finished, and only
// with room for its one temporary, so no update is ever half applied.
//
// A step may run in parts: micro-batches (plain gradient accumulation with
// the weights on the device), and, with ranks, this rank's slice of the
// ranks' global batch. Every part's loss carries its share of the global
// count of what the loss averages over (tokens, images), and its dropout
// draws from a generator seeded per global part, so N ranks compute what one
// process running the N slices as N micro-batches computes. The ranks' gradients are
// summed during the step's last part, bucket by bucket as the backward makes
// them final (RankGradientSums, AllReduce in the schedule; in rank order with
// deterministic_reduce: then bit for bit that one process's), and
// parameters start as rank 0's. Planners plan for the budget less what the
// sums' copies may hold.
//
// With the weights in host memory (Harmony) the model and Adam live in the
// host pool, HostWeights moves them, and each step is split into
// micro-batches: the planners plan the chain of the step's largest
// micro-batch, whose size stands for the step's everywhere (predictor, plan
// cache). The updates are part of the schedule, staged per stage on the host
// and made current only when the whole step has run; a failed attempt
// abandons them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/chain.h"
#include "core/copy_stats.h"
#include "core/error.h"
#include "core/plan.h"
#include "core/reduce_stats.h"
#include "core/signature.h"
#include "core/units.h"
#include "plan/planner.h"
#include "predict/chain_predictor.h"
#include "predict/prediction_error.h"
#include "runtime/comm/rank_group.h"
#include "runtime/comm/tensor_buckets.h"
#include "runtime/execution/executor.h"
#include "runtime/execution/host_weights.h"
#include "runtime/input/batch_source.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/adam.h"
#include "runtime/model/staged_model.h"
#include "runtime/step/leased_steps.h"
#include "runtime/step/planned_step.h"
#include "runtime/step/step_budget.h"
#include "runtime/step/step_lease.h"
#include "runtime/step/step_planner.h"
#include "runtime/step/step_record.h"
#include "runtime/training/rank_steps.h"
#include "runtime/training/step_parts.h"
#include "runtime/training/trainer_options.h"

namespace memtrain::runtime {

// The copies of the planned steps of `records` added up; collection steps,
// which swap everything whatever the planner, are left out.
CopyStats planned_copies(const std::vector<StepRecord>& records);

struct TrainSummary {
  Bytes budget_bytes = 0;
  Bytes reference_peak_bytes = 0;  // unconstrained peak of the largest input; 0: not measured
  Bytes max_peak_bytes = 0;
  long steps = 0;
  long violations = 0;  // steps whose measured peak exceeded the budget
  long retries = 0;     // mispredictions caught and retried
  long cache_hits = 0;
  long cache_misses = 0;               // new plans made
  double median_prediction_error = 0;  // relative, after the collection phase
  double max_prediction_error = 0;
  double predictor_fit_error = 0;  // worst relative rms residual of a memory fit (ChainPredictor)
  Seconds mean_step_seconds = 0;
  Seconds data_wait_seconds = 0;  // all steps' waits for their batches
  double data_wait_fraction = 0;  // of all steps' time
  Bytes resident_bytes = 0;    // device bytes beyond weights, state and batch at a step's start (Chain::resident_bytes)
  long collection_steps = 0;   // steps that ran the collection schedule, left out of the copy figures below
  CopyStats planned_copies;    // the copies of the steps that ran a planned schedule, added up
  ReduceStats planned_reduce;  // ranks: the gradient sums of those steps, added up
  // Bytes per planned step, from planned_copies: the mean over the steps that
  // ran a planned schedule (0 when none did).
  double per_planned_step(Bytes bytes) const {
    const long planned = steps - collection_steps;
    return planned > 0 ? static_cast<double>(bytes) / static_cast<double>(planned) : 0;
  }
  // Median of |simulated - measured| / measured schedule time, after collection.
  double median_time_prediction_error = 0;
  // The host link the trainer would plan the next step with, bytes/s: the
  // given one, refined by the steps' copies unless refine_link is false.
  double to_host_bandwidth = 0;
  double to_device_bandwidth = 0;
  Seconds mean_new_plan_seconds = 0;  // planning time per new size
  Seconds mean_cached_plan_seconds = 0;
  Seconds lease_wait_seconds = 0;   // all steps' waits for their leases
  Bytes optimizer_state_bytes = 0;  // Adam's moments held by this process (its shard's when sharded)
};

class Trainer {
 public:
  using ModelFactory = std::function<StagedModel()>;

  // Builds the model (seeding LibTorch's default generator with options.seed
  // for its initial weights) and the optimizer inside `memory` (its host
  // pool with options.weights_on_host). Throws UsageError for options that
  // do not go together (a planner that cannot plan where the weights are).
  Trainer(TrainerOptions options, DeviceMemory& memory, ModelFactory factory, BatchSource& source);
  ~Trainer();

  // Measures the largest input and fixes the budget. Throws memtrain::Error
  // when the budget is below what the planner needs for that input.
  void calibrate();
  StepRecord step();  // calibrates first if needed

  // Everything the next step depends on (weights, buffers, Adam's state,
  // the random generators, how many batches were trained), written to
  // `path` atomically; with ranks, every rank writes its own and none is
  // put in place before all are written. Weights on the device only.
  void save_checkpoint(const std::string& path);
  // Continues where save_checkpoint() left off: the next step trains the
  // batch an uninterrupted run would, with the same weights and draws, so
  // it ends bit for bit the same. Before the first step.
  void resume(const std::string& path);
  // Steps trained, those before a resume included.
  std::int64_t steps_done() const { return first_step_ + static_cast<std::int64_t>(records_.size()); }

  const std::vector<StepRecord>& records() const { return records_; }
  TrainSummary summary() const;
  Bytes budget_bytes() const { return calibrated_ ? budget_.bytes() : 0; }
  bool weights_on_host() const { return host_weights_ != nullptr; }
  // Ranks: whether the gradient sums run beside the backward (after calibration).
  bool sums_beside_backward() const { return ranks_->sums_beside_backward(); }
  int micro_batches() const { return options_.micro_batches; }
  const Chain& largest_chain() const { return largest_chain_; }
  const Signature& largest_signature() const { return largest_signature_; }
  const predict::ChainPredictor& predictor() const { return step_planner_->predictor(); }
  // How much more activation memory new sizes are planned for (StepPlanner::observe_peak).
  double learned_shortfall() const { return step_planner_->learned_shortfall(); }
  StagedModel& model() { return *model_; }
  const plan::Planner& planner() const { return step_planner_->planner(); }

  std::function<void(const StepRecord&)> on_step;  // called after every step

 private:
  // One attempt at a step, over all its parts.
  struct StepRun {
    ExecutionResult result;  // ops and peak of the part that needed most; seconds and copies of all
    std::vector<double> losses, correct, counted;  // per part
  };

  // Calibration, by mode: the measurements on the largest input, then the budget.
  void measure_largest(const Batch& largest);  // the reference peak, the largest chain
  void fix_budget();
  void fix_own_budget();
  ExecutionResult measure(const Schedule& schedule, const Batch& batch);

  // The steps of step(), in order.
  void take_lease(std::int64_t size, StepRecord& rec);
  // Runs `choice` on `parts`; a run out of budget is rolled back (gradients,
  // staged updates, buffers, generator) and retried with the step planner's
  // next schedule, which `choice` and `rec` then name.
  StepRun run_with_retries(const StepParts& parts, PlannedStep& planned, StepRecord& rec);
  StepRun run_parts(const Schedule& schedule, const StepParts& parts);
  // What the run copied and waited for, and what the Simulator predicted for
  // it (for each of its `parts` runs of the schedule). `reduction`: with
  // ranks, the gradient sums the last part ran, as predicted before the step.
  void record_run(const Schedule& schedule, std::int64_t size, const ExecutionResult& result, int parts,
                  const GradientReduction& reduction, StepRecord& rec);
  // The optimizer step (on the device with room for its temporary, or the
  // host's staged updates made current); returns how far its peak rose above
  // what was live before it.
  Bytes update(const ExecutionResult& result, StepRecord& rec);
  // The step's loss and accuracy over all parts (and ranks).
  void record_outcome(const StepRun& run, StepRecord& rec);

  bool split_steps() const { return !host_weights_ && (options_.micro_batches > 1 || ranks_->ranked()); }
  // Planners plan the next step for the budget's planning bytes: the
  // step's, less what the gradient sums' copies may hold.
  void plan_for_budget();
  // The shape and size the predictor and the plan cache know a batch by:
  // its own, or its largest micro-batch's when a step is split.
  Signature planning_signature(const Signature& sig) const;
  // Every rank's `mine`, in rank order; without ranks, this process's alone.
  std::vector<std::vector<double>> across_ranks(const std::vector<double>& mine);
  // The model's fixed per-stage costs, with this rank's optimizer shard.
  std::vector<predict::StageConstants> model_constants() const;
  // Forgets a run's gradients (and, weights on host, its staged updates).
  void discard_gradients();
  // Weights on the host: the host's optimizer step per stage, from a run's Update operations.
  void observe_update_times(const ExecutionResult& result);
  void observe_resident(const Batch& batch);
  StepContext context_for(const Batch& batch);
  void check_checkpoints() const;

  TrainerOptions options_;
  DeviceMemory& memory_;
  BatchSource& source_;
  std::unique_ptr<StagedModel> model_;
  // The modes, each deciding its own part of a step; lease_ and host_weights_ are null when off.
  std::unique_ptr<RankSteps> ranks_;           // data parallelism over options.ranks (a world of one without)
  std::unique_ptr<LeasedSteps> lease_;         // a device shared with other jobs
  std::unique_ptr<HostWeights> host_weights_;  // weights in host memory
  std::unique_ptr<Adam> optimizer_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<StepPlanner> step_planner_;       // Mimose's loop: predictor, plan caches, retry ladder
  predict::PredictionError prediction_error_;       // of peaks
  predict::PredictionError time_prediction_error_;  // of schedule times
  at::Generator generator_;

  bool calibrated_ = false;
  // The options' budget, the reference a share is of, the run's bytes (a
  // shared device: the group's), the step's grant and the sums' reserve.
  StepBudget budget_;
  Signature largest_signature_;
  Chain largest_chain_;
  std::vector<StepRecord> records_;
  std::int64_t first_step_ = 0;  // steps trained before a resume
  long retries_ = 0;
};

}  // namespace memtrain::runtime
