// The Mimose loop, per step: the batch's signature -> a cached plan, or the
// predictor's chain for this size and a new plan -> execute -> measure ->
// teach the predictor. Before the first step it calibrates on the dataset's
// largest input: the unconstrained peak (for budgets given as N%) and one
// fully measured chain. The first `collect_steps` steps checkpoint every
// stage so any size fits while the predictor learns.
//
// A step that still runs out of budget (a misprediction) loses nothing: its
// partial gradients are discarded, the random generators rewound, the
// batch-norm statistics restored (BufferSnapshot), the plan marked bad, and
// the same batch runs again under a stricter plan. The
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
#include "predict/copy_issue_estimate.h"
#include "predict/link_estimate.h"
#include "predict/plan_cache.h"
#include "predict/prediction_error.h"
#include "runtime/comm/rank_group.h"
#include "runtime/comm/tensor_buckets.h"
#include "runtime/execution/executor.h"
#include "runtime/execution/host_weights.h"
#include "runtime/input/batch_source.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/adam.h"
#include "runtime/model/staged_model.h"
#include "runtime/training/rank_gradient_sums.h"
#include "runtime/training/step_lease.h"

namespace memtrain::runtime {

constexpr int kMaxCollectSteps = 10;  // the most collection steps a trainer takes
constexpr double kMaxMargin = 10;     // the largest memory margin, as a fraction

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
};

// Where a step's schedule came from.
enum class PlanKind {
  Collect,  // a collection step: measures every stage, whatever the planner
  New,      // planned for this step's size
  Cached,   // the plan cache's schedule for this size
  Retry,    // a stricter schedule after the step ran out of budget
};
const char* plan_kind_name(PlanKind kind);  // "collect", "new", "cached", "retry"

struct StepRecord {
  std::int64_t step = 0;   // 1-based
  std::int64_t epoch = 0;  // 0-based epoch of the batch
  Signature signature;     // the batch's input shape and size
  PlanKind plan = PlanKind::New;
  std::string schedule;             // compact text of the schedule run
  int recomputed_forwards = 0;      // forwards beyond one per stage
  Bytes predicted_peak_bytes = -1;  // simulated on the predicted chain; -1: none
  Bytes peak_bytes = 0;             // measured, update included
  Bytes budget_bytes = 0;           // this step's: the lease when the device is shared
  bool violation = false;           // peak_bytes > budget_bytes
  Seconds lease_wait_seconds = 0;   // waiting for the lease (0 unless shared)
  // Shared device: what the step asked for, and the Simulator's times on
  // the predicted chain for the schedule run and for keeping everything.
  Bytes lease_want_bytes = 0, lease_least_bytes = 0;
  Seconds predicted_plain_seconds = -1;
  Bytes predicted_plain_peak_bytes = -1;
  int retries = 0;                // out-of-budget attempts before this one ran
  Seconds seconds = 0;            // wall time of the whole step, data wait included
  Seconds data_wait_seconds = 0;  // waiting for the batch: the input pipeline's stall
  Seconds planning_seconds = 0;   // time spent choosing the plan (cache lookup or planning)
  double loss = 0;
  double accuracy = 0;           // fraction of counted tokens or images right
  CopyStats copies;              // what the step's copies moved and cost
  Seconds schedule_seconds = 0;  // the schedule's wall time (the update excluded)
  ReduceStats reduce;            // summing the ranks' gradients, beside the backward (none with one rank)
  Seconds predicted_reduce_stall_seconds = -1;  // the Simulator's wait for those sums; -1: none
  Seconds share_seconds = 0;                    // a sharded optimizer: sharing the updated weights
  Seconds predicted_schedule_seconds = -1;      // simulated on the predicted chain; -1: none
};

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
  Bytes budget_bytes() const { return budget_; }
  bool weights_on_host() const { return host_weights_ != nullptr; }
  // Ranks: whether the gradient sums run beside the backward (after calibration).
  bool sums_beside_backward() const { return sums_ && sums_beside_backward_; }
  int micro_batches() const { return options_.micro_batches; }
  const Chain& largest_chain() const { return largest_chain_; }
  const Signature& largest_signature() const { return largest_signature_; }
  const predict::ChainPredictor& predictor() const { return *predictor_; }
  StagedModel& model() { return *model_; }
  const plan::Planner& planner() const { return *planner_; }

  std::function<void(const StepRecord&)> on_step;  // called after every step

 private:
  // `chain` with what the trainer knows beyond the predictor: the host link and resident bytes.
  Chain completed(Chain chain) const;
  Chain predicted_chain(std::int64_t size) const { return completed(predictor_->predict(size)); }
  // Device bytes live beyond the weights, their state and the batch when a
  // step starts (a GPU library's workspaces): kept as the chain's resident_bytes.
  void observe_resident(const Batch& batch);
  struct Choice {
    Schedule schedule;
    PlanKind kind = PlanKind::New;
    Seconds planning_seconds = 0;
  };
  // A step's batch as the executor runs it: whole, or in parts.
  struct StepParts {
    std::vector<Batch> batches;
    std::vector<std::uint64_t> seeds;  // each part's dropout generator; empty: the trainer's
    std::vector<double> loss_weights;  // each part's share of the step's loss
    // Weights in host memory with ranks: what the schedule's own
    // micro-batches need to be the job's (StepContext::micro_seeds).
    std::vector<std::uint64_t> micro_seeds;
    double micro_loss_denominator = 0;
  };
  // One attempt at a step, over all its parts.
  struct StepRun {
    ExecutionResult result;  // ops and peak of the part that needed most; seconds and copies of all
    std::vector<double> losses, correct, counted;  // per part
  };
  bool split_steps() const { return !host_weights_ && (options_.micro_batches > 1 || options_.ranks); }
  // Splits the step's batch (drawing its parts' seeds, and with ranks
  // learning the global count of what the loss averages over).
  StepParts split(const Batch& batch);
  // Weights in host memory with ranks: the seeds and global count of the
  // micro-batches the schedule splits this rank's slice into.
  void split_among_ranks(const Batch& batch, StepParts& p);
  StepRun run_parts(const Schedule& schedule, const StepParts& parts);
  // Ranks: the gradient sums, cut into pieces small enough for this rank's
  // budget and every other rank's (the ranks agree on the cut).
  void start_gradient_sums();
  // The budget planners plan a step for: the step's, less what the
  // gradient sums' copies may hold.
  Bytes planning_budget() const { return step_budget_ - (sums_ && sums_beside_backward_ ? sums_->reserve_bytes() : 0); }
  // What the last part of a step runs with ranks: `schedule` with its sums.
  Schedule summing(const Schedule& schedule) const;
  // Weights whose gradients an earlier attempt of this step already summed
  // over the ranks: the retry leaves them out (no gradient, not zeroed).
  void freeze_summed(const std::vector<int>& stages);
  void thaw_summed();
  // Rank r's part of the weights (its optimizer shard), as views.
  std::vector<torch::Tensor> shard_pieces(int r) const;
  // A sharded optimizer: every rank's updated elements to every other rank.
  void share_weights(StepRecord& rec);
  // Whose optimizer shard this process keeps: 0 and 0 when unsharded.
  int shard_world() const { return optimizer_->sharded() ? options_.ranks->world() : 0; }
  int shard_rank() const { return optimizer_->sharded() ? options_.ranks->rank() : 0; }
  // The model's fixed per-stage costs, with this rank's optimizer shard.
  std::vector<predict::StageConstants> model_constants() const;
  // Every rank's `mine`, in rank order; without ranks, this process's alone.
  std::vector<std::vector<double>> across_ranks(const std::vector<double>& mine);
  // The step's loss and accuracy over all parts (and ranks).
  void record_outcome(const StepRun& run, StepRecord& rec);
  Choice choose(std::int64_t size);  // size: planning_size() of the batch
  // What planners see for `size`: the prediction at its bucket's edge,
  // scaled by options.prediction_scale.
  Chain planning_chain(std::int64_t size);
  // A shared device: this size's lease request (cached per plan bucket),
  // and the budget the next steps run under.
  StepLeaseRequest lease_request(std::int64_t size, bool collecting);
  void use_budget(Bytes budget);
  // Ranks: check they agree, and start every one from rank 0's weights.
  void start_ranks();
  // Calibration's budget on a shared device: the group's.
  void calibrate_shared(Bytes least_largest);
  // The steps of step(), in order. Runs `choice` on `batch`; a run out of
  // budget is rolled back (gradients, staged updates, buffers, generator)
  // and retried with a stricter schedule, which `choice` and `rec` then name.
  StepRun run_with_retries(const StepParts& parts, std::int64_t size, Choice& choice, StepRecord& rec);
  // What the run copied and waited for, and what the Simulator predicted for
  // it (for each of its `parts` runs of the schedule).
  // `reduction`: with ranks, the gradient sums the last part ran, as
  // predicted before the step.
  void record_run(const Schedule& schedule, std::int64_t size, const ExecutionResult& result, int parts,
                  const GradientReduction& reduction, StepRecord& rec);
  // The optimizer step (on the device with room for its temporary, or the
  // host's staged updates made current), then the predictor's observation.
  void update(std::int64_t size, const ExecutionResult& result, StepRecord& rec);
  Plan plan_for(std::int64_t size);
  // The schedule with the lowest predicted peak for this size: the planner's
  // own at the least budget it can work with, or every stage checkpointed.
  Schedule most_frugal(std::int64_t size);
  // The size the predictor and the plan cache know a batch by: its own, or
  // that of its largest micro-batch when a step is split.
  std::int64_t planning_size(const Signature& sig) const;
  // What a collection step runs: every stage checkpointed (in `round`'s
  // variants), its weights swapped one stage at a time when they live on the host.
  Schedule collection_schedule(int round) const;
  // The least memory any schedule needs, whatever the predictor says.
  Schedule fallback_schedule() const;
  // Forgets a run's gradients (and, weights on host, its staged updates).
  void discard_gradients();
  // The host's optimizer step per stage, from a run's Update operations.
  void observe_update_times(const ExecutionResult& result);
  // Collection runs: one per variant when the planner chooses variants.
  int variant_rounds() const;
  StepContext context_for(const Batch& batch);
  Error below_minimum(const Signature& sig, Bytes minimum) const;

  TrainerOptions options_;
  DeviceMemory& memory_;
  BatchSource& source_;
  std::unique_ptr<StagedModel> model_;
  std::unique_ptr<Adam> optimizer_;
  std::vector<std::vector<ElementRange>> shards_;  // a sharded optimizer: per rank, its elements of each weight
  Bytes bucket_bytes_ = kBucketBytes;              // with ranks: the pieces the ranks agreed on (sums, sharing)
  std::unique_ptr<RankGradientSums> sums_;         // with ranks: the gradient sums
  bool sums_beside_backward_ = true;               // false: no room for them there; they follow the backward
  std::vector<torch::Tensor> frozen_;              // weights left out of a retry (freeze_summed)
  std::unique_ptr<plan::Planner> planner_;
  std::unique_ptr<HostWeights> host_weights_;  // weights in host memory; null: on the device
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<predict::ChainPredictor> predictor_;
  // One plan cache per step budget: one unless leases change the budget.
  std::map<Bytes, std::unique_ptr<predict::PlanCache>> caches_;
  predict::PlanCache* cache_ = nullptr;
  std::int64_t bucket_width_ = 1;
  std::map<std::int64_t, StepLeaseRequest> lease_requests_;  // by plan bucket
  predict::PredictionError prediction_error_;                // of peaks
  predict::PredictionError time_prediction_error_;           // of schedule times
  at::Generator generator_;

  bool calibrated_ = false;
  Bytes budget_ = 0;       // the run's budget (a shared device: the group's)
  Bytes step_budget_ = 0;  // the budget steps plan and run under now
  Bytes reference_peak_ = 0;
  Bytes extra_resident_ = 0;           // the most observe_resident() has seen
  std::vector<Seconds> update_times_;  // per stage, the shortest host update seen; weights on host
  predict::LinkEstimate link_;
  predict::CopyIssueEstimate copy_issue_;
  Signature largest_signature_;
  Chain largest_chain_;
  std::vector<StepRecord> records_;
  std::int64_t first_step_ = 0;  // steps trained before a resume
  long retries_ = 0;
};

}  // namespace memtrain::runtime
