#include "runtime/training/trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"
#include "plan/schedule_builders.h"
#include "runtime/execution/chain_measurement.h"
#include "runtime/step/calibration.h"
#include "runtime/step/planned_step.h"
#include "runtime/step/step_attempts.h"
#include "runtime/step/step_rollback.h"
#include "runtime/training/checkpoint_file.h"
#include "runtime/training/step_parts.h"
#include "runtime/training/trainer_checkpoint.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Trainer::Trainer(TrainerOptions options, DeviceMemory& memory, ModelFactory factory, BatchSource& source)
    : options_(std::move(options)), memory_(memory), source_(source), budget_(options_.budget) {
  check_trainer_options(options_);
  const auto scope = memory_.activate();
  std::optional<PoolScope> in_host_pool;
  if (options_.weights_on_host) in_host_pool.emplace(&memory_.host());
  torch::manual_seed(options_.seed);  // the model's initial weights
  model_ = std::make_unique<StagedModel>(factory());
  if (!options_.weights_on_host) model_->to(memory_.device());
  model_->train(true);
  ranks_ = std::make_unique<RankSteps>(
      options_.ranks,
      RankStepsOptions{options_.deterministic_reduce, options_.sum_beside_backward, options_.shard_optimizer});
  ranks_->cut_shards(*model_);
  optimizer_ = ranks_->sharded() ? std::make_unique<Adam>(model_->parameters(), options_.adam, ranks_->my_shard())
                                 : std::make_unique<Adam>(model_->parameters(), options_.adam);
  executor_ = std::make_unique<Executor>(*model_, memory_);
  WeightPlacement placement;
  if (options_.weights_on_host) {
    host_weights_ = std::make_unique<HostWeights>(*model_, *optimizer_, memory_);
    executor_->set_host_weights(host_weights_.get());
    placement = {true, options_.micro_batches, !host_weights_->updates_on_own_thread()};
  }
  if (options_.lease) lease_ = std::make_unique<LeasedSteps>(*options_.lease);
  step_planner_ = std::make_unique<StepPlanner>(step_planner_options(options_), *model_, model_constants(), placement);
  generator_ = memory_.make_generator(options_.seed);
  ranks_->start(*model_, memory_, options_.seed, options_.micro_batches);
}

Trainer::~Trainer() = default;

std::vector<predict::StageConstants> Trainer::model_constants() const {
  if (!optimizer_->sharded()) return stage_constants(*model_, Adam::kSlots);
  std::vector<Bytes> optimizer_bytes;
  std::size_t k = 0;
  for (int i = 0; i < model_->size(); ++i) {
    Bytes stage = 0;
    for (const torch::Tensor& p : model_->stage(i).parameters()) {
      stage += optimizer_->owned(k++).size() * static_cast<Bytes>(p.element_size()) * Adam::kSlots;
    }
    optimizer_bytes.push_back(stage);
  }
  return stage_constants(*model_, Adam::kSlots, optimizer_bytes);
}

StepContext Trainer::context_for(const Batch& batch) {
  StepContext ctx;
  ctx.targets = batch.targets;
  ctx.key_padding = batch.key_padding;
  ctx.generator = generator_;
  ctx.training = true;
  return ctx;
}

Signature Trainer::planning_signature(const Signature& sig) const {
  const int m = options_.micro_batches;
  if (m == 1 || sig.shape.empty()) return sig;
  std::vector<std::int64_t> shape = sig.shape;
  shape[0] = (shape[0] + m - 1) / m;  // split_batch gives micro-batch 0 the spare rows
  return Signature::of_shape(std::move(shape));
}

void Trainer::discard_gradients() {
  const std::vector<torch::Tensor>& frozen = ranks_->frozen();
  if (host_weights_) {
    host_weights_->abandon(frozen);
  } else if (frozen.empty()) {
    optimizer_->zero_grad();
  } else {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& w : model_->parameters()) {
      if (w.requires_grad()) w.mutable_grad().zero_();
    }
  }
}

void Trainer::observe_update_times(const ExecutionResult& result) {
  for (const OpRecord& r : result.ops) {
    if (r.op.kind == OpKind::Update)
      step_planner_->observe_update_time(r.op.stage, host_weights_->update_seconds(r.op.stage));
  }
}

ExecutionResult Trainer::measure(const Schedule& schedule, const Batch& batch) {
  // A measurement, not training: no buffer updates, and nothing else it
  // did survives (its gradients, its random draws).
  StepRollback measurement(generator_, nullptr, memory_);
  measurement.discard_gradients_with([this] { discard_gradients(); });
  StepContext ctx = context_for(batch);
  ctx.update_buffers = false;
  ExecutionResult r = executor_->run(schedule, batch, ctx);
  measurement.roll_back();
  return r;
}

void Trainer::calibrate() {
  if (calibrated_) return;
  const auto scope = memory_.activate();
  const Batch largest = source_.largest(memory_.device());
  largest_signature_ = largest.signature;
  const std::int64_t rows = largest.signature.shape.empty() ? 1 : largest.signature.shape[0];
  if (options_.micro_batches > rows) {
    throw UsageError(std::to_string(options_.micro_batches) + " micro-batches are more than the " +
                     std::to_string(rows) + " examples of the largest batch (" + largest.signature.describe() +
                     "); expected at most " + std::to_string(rows));
  }
  {
    // Measurements, not steps: the budget is not enforced while they run.
    EnforcementScope unenforced(memory_, false);
    // Other jobs calibrate in turn: none of them measures beside another.
    if (lease_) lease_->begin_calibration();
    measure_largest(largest);
  }
  fix_budget();
  calibrated_ = true;
}

void Trainer::measure_largest(const Batch& largest) {
  const int n = model_->size();
  // A step split on the device runs its first (largest) part at a time.
  const Batch measured = split_steps() ? batch_rows(largest, 0, options_.micro_batches) : largest;
  const bool percent = options_.budget.is_percent && !options_.least_budget;
  // With the weights in host memory, the step with everything on the device
  // is never run (it is what does not fit): its peak is simulated below.
  // Nor on a shared device, where it would take the others' memory.
  Calibration calibration(*step_planner_, percent && !host_weights_ && !lease_);
  const Signature at = planning_signature(largest.signature);
  const std::int64_t size = at.size;
  for (int round = 0; round < calibration.rounds(); ++round) {
    const Schedule schedule = calibration.schedule(round, n);
    if (calibration.is_reference(round)) {
      calibration.observe_reference(measure(schedule, measured).peak);
      continue;
    }
    auto collect_once = [&] {
      const ExecutionResult r = measure(schedule, measured);
      if (host_weights_) observe_update_times(r);
      step_planner_->observe_copy_issue(r);
      // With the weights on the host the update runs there: no device temporary.
      return sample_execution(r, n, host_weights_ ? 0 : optimizer_->update_temp_bytes());
    };
    predict::ChainSample sample = collect_once();
    if (calibration.times_twice()) sample = faster_of(sample, collect_once());
    calibration.observe_collection(round, std::move(sample));
  }
  if (calibration.reference_peak() > 0) budget_.set_reference(calibration.reference_peak());
  calibration.teach(*step_planner_, at);
  step_planner_->note_size(size);
  observe_resident(largest);
  largest_chain_ = step_planner_->completed(chain_from_samples(calibration.samples(), model_constants()), size);
  step_planner_->pin_largest(largest_chain_);
  if (lease_ || (host_weights_ && percent)) {
    // As `memtrain simulate` does: N% of one micro-batch's step with the
    // weights, gradients and optimizer state all on the device.
    budget_.set_reference(plan::keep_everything_peak(largest_chain_));
  }
}

void Trainer::fix_budget() {
  if (lease_) {
    budget_.respecify(BudgetSpec{false, 0, lease_->calibrated(*step_planner_, largest_chain_, budget_.reference())});
    plan_for_budget();
    return;
  }
  fix_own_budget();
  refuse_below_least(*step_planner_, largest_chain_, budget_.planning_bytes(), largest_signature_, budget_.reserve());
}

void Trainer::fix_own_budget() {
  plan::Planner& planner = step_planner_->planner();
  if (options_.least_budget) {
    const Plan least = planner.plan({largest_chain_, 0, &largest_chain_});
    const Bytes least_bytes = least.feasible ? least.peak_bytes : least.min_budget_bytes;
    if (least_bytes <= 0) {
      throw Error("planner " + planner.name() + " reports no least budget for input " + largest_signature_.describe() +
                  "; give a budget");
    }
    budget_.respecify(BudgetSpec{false, 0, least_bytes});
  }
  const Bytes bytes = budget_.bytes();  // UsageError for a share that was not measured
  // Whether the planner still plans the largest input with `reserve` bytes less.
  const auto fits = [&](Bytes reserve) {
    return !planner.respects_budget() || options_.least_budget ||
           planner.plan({largest_chain_, bytes - reserve, &largest_chain_}).feasible;
  };
  ranks_->start_sums(*model_, bytes, host_weights_ != nullptr, fits);
  budget_.set_reserve(ranks_->planning_reserve());
  // The least budget is the planner's, plus what the sums' copies hold beside the backward.
  if (options_.least_budget) budget_.respecify(BudgetSpec{false, 0, bytes + budget_.reserve()});
  plan_for_budget();  // with the sums' reserve
}

void Trainer::plan_for_budget() {
  step_planner_->use_budget(budget_.planning_bytes());  // the step's guard sets the device's
}

void Trainer::observe_resident(const Batch& batch) {
  step_planner_->observe_resident(memory_.live(), batch.bytes(), planning_signature(batch.signature).size);
}

StepRecord Trainer::step() {
  calibrate();
  const auto scope = memory_.activate();
  const Clock::time_point t0 = Clock::now();
  const long synchronizations = memory_.synchronizations();
  const Batch batch = source_.next(memory_.device());
  StepRecord rec;
  rec.data_wait_seconds = seconds_since(t0);
  rec.step = steps_done() + 1;
  rec.epoch = source_.epoch();
  rec.signature = batch.signature;
  const Signature at = planning_signature(batch.signature);
  const std::int64_t size = at.size;
  observe_resident(batch);
  // A shared device: the lease shrinks again however the step ends.
  struct Settle {
    LeasedSteps* lease;
    bool taken = false;
    ~Settle() {
      if (lease) lease->settle(taken);
    }
  } settle{lease_.get()};
  if (lease_) take_lease(size, rec);
  rec.budget_bytes = budget_.step_bytes();

  const StepParts parts = split_step(batch, options_.micro_batches, split_steps(), *ranks_, generator_);
  PlannedStep planned(*step_planner_,
                      {size, static_cast<long>(records_.size()),
                       "step " + std::to_string(rec.step) + ": input " + rec.signature.describe()},
                      StepGuard(memory_, budget_.step_bytes(), options_.enforce && planner().respects_budget(),
                                generator_, model_.get()));
  // An attempt rolled back leaves no gradient (or staged update) of its own.
  planned.guard().rollback().discard_gradients_with([this] { discard_gradients(); });
  rec.plan = planned.choice().kind;
  rec.planning_seconds = planned.choice().planning_seconds;
  // What the sums are predicted to cost: the network as the steps before this one showed it.
  const GradientReduction reduction = ranks_->reduction();
  const StepRun run = run_with_retries(parts, planned, rec);
  record_run(planned.choice().schedule, size, run.result, static_cast<int>(parts.batches.size()), reduction, rec);
  const Bytes update_temp = update(run.result, rec);
  planned.finish(at, run.result, rec.peak_bytes, update_temp, rec.predicted_peak_bytes);

  rec.violation = rec.peak_bytes > budget_.step_bytes();
  settle.taken = true;
  if (rec.plan != PlanKind::Collect) {
    prediction_error_.record(rec.predicted_peak_bytes, rec.peak_bytes);
    time_prediction_error_.record(rec.predicted_schedule_seconds, rec.schedule_seconds);
  }
  record_outcome(run, rec);
  rec.synchronizations = memory_.synchronizations() - synchronizations;
  rec.seconds = seconds_since(t0);
  records_.push_back(rec);
  if (on_step) on_step(rec);
  return rec;
}

void Trainer::take_lease(std::int64_t size, StepRecord& rec) {
  const bool collecting = static_cast<int>(records_.size()) < options_.steps.collect_steps;
  const LeasedSteps::Grant grant = lease_->acquire(*step_planner_, size, collecting);
  rec.lease_want_bytes = grant.request.want;
  rec.lease_least_bytes = grant.request.least;
  rec.lease_wait_seconds = grant.waited;
  budget_.grant(grant.budget);
  plan_for_budget();
}

Trainer::StepRun Trainer::run_parts(const Schedule& schedule, const StepParts& parts) {
  StepRun run;
  for (std::size_t i = 0; i < parts.batches.size(); ++i) {
    const Batch& batch = parts.batches[i];
    StepContext ctx = context_for(batch);
    if (!parts.seeds.empty()) ctx.generator = memory_.make_generator(parts.seeds[i]);
    ctx.loss_weight = parts.loss_weights[i];
    ctx.micro_seeds = parts.micro_seeds;
    ctx.micro_loss_denominator = parts.micro_loss_denominator;
    // With ranks, the last part's backward makes the gradients final: it sums them as it goes.
    const bool last = i + 1 == parts.batches.size();
    ExecutionResult r = ranks_->sums() && last ? executor_->run(ranks_->summing(schedule), batch, ctx, ranks_->sums())
                                               : executor_->run(schedule, batch, ctx);
    run.losses.push_back(r.loss);
    run.correct.push_back(ctx.correct);
    run.counted.push_back(ctx.counted);
    if (i == 0) {
      run.result = std::move(r);
      continue;
    }
    // The predictor learns from the part that needed the most: a later
    // part's backward adds into gradients the earlier ones left.
    const Seconds seconds = run.result.seconds + r.seconds;
    CopyStats copies = run.result.copies;
    copies += r.copies;
    ReduceStats reduce = run.result.reduce;
    reduce += r.reduce;
    if (r.peak > run.result.peak) run.result = std::move(r);
    run.result.seconds = seconds;
    run.result.copies = copies;
    run.result.reduce = reduce;
  }
  return run;
}

std::vector<std::vector<double>> Trainer::across_ranks(const std::vector<double>& mine) { return ranks_->gather(mine); }

void Trainer::record_outcome(const StepRun& run, StepRecord& rec) {
  // Every part's loss, added in the job's order: what one process running
  // the parts in turn reports.
  std::vector<double> mine = run.losses;
  mine.insert(mine.end(), run.correct.begin(), run.correct.end());
  mine.insert(mine.end(), run.counted.begin(), run.counted.end());
  const std::size_t m = run.losses.size();
  double loss = 0, correct = 0, counted = 0;
  for (const std::vector<double>& theirs : across_ranks(mine)) {
    for (std::size_t i = 0; i < m; ++i) {
      loss += theirs[i];
      correct += theirs[m + i];
      counted += theirs[2 * m + i];
    }
  }
  rec.loss = loss;
  rec.accuracy = counted > 0 ? correct / counted : 0;
}

Trainer::StepRun Trainer::run_with_retries(const StepParts& parts, PlannedStep& planned, StepRecord& rec) {
  // However the step ends, every weight takes gradients again.
  struct Thaw {
    RankSteps& ranks;
    ~Thaw() { ranks.thaw_summed(); }
  } thaw{*ranks_};
  ranks_->begin_step();
  try {
    return run_attempts([&] { return run_parts(planned.choice().schedule, parts); },
                        [&](const OutOfBudget& why) {
                          // The retry rolls back (PlannedStep::retry): no
                          // gradient (or staged update, or batch-norm
                          // statistic) of the failed attempt survives, and
                          // it draws the same random numbers. Gradients
                          // already summed over the ranks were final and stand.
                          ranks_->freeze_summed(*model_);
                          ++retries_;
                          const StepChoice& next = planned.retry(why);
                          rec.retries = planned.retries();
                          rec.plan = PlanKind::Retry;
                          rec.planning_seconds = next.planning_seconds;
                        });
  } catch (...) {
    // A schedule that cannot run at all, or no schedule left: nothing of
    // the last attempt survives either.
    planned.guard().roll_back();
    throw;
  }
}

void Trainer::record_run(const Schedule& schedule, std::int64_t size, const ExecutionResult& result, int parts,
                         const GradientReduction& reduction, StepRecord& rec) {
  rec.schedule = schedule;
  rec.recomputed_forwards = schedule.recomputed_forwards(model_->size());
  const Chain chain = step_planner_->predicted_chain(size);
  const sim::SimResult predicted = sim::simulate(chain, schedule);
  rec.predicted_peak_bytes = predicted.peak_bytes;
  rec.predicted_schedule_seconds = predicted.time * parts;
  if (!reduction.empty()) {
    // The last part sums the gradients as its backward makes them final.
    Chain ranked = chain;
    ranked.reduction = reduction;
    const Schedule with_sums = ranks_->summing(schedule);
    const sim::SimResult summed = sim::simulate(ranked, with_sums);
    rec.schedule = with_sums;
    rec.predicted_peak_bytes = std::max(predicted.peak_bytes, summed.peak_bytes);
    rec.predicted_schedule_seconds = predicted.time * (parts - 1) + summed.time;
    rec.predicted_reduce_stall_seconds = summed.reduce.stall_seconds;
  }
  rec.reduce = result.reduce;
  if (lease_) {
    const sim::SimResult plain = sim::simulate(chain, plan::schedule_keeping_everything(model_->size()));
    rec.predicted_plain_seconds = plain.time;
    rec.predicted_plain_peak_bytes = plain.peak_bytes;
  }
  rec.schedule_seconds = result.seconds;
  rec.copies = result.copies;
}

Bytes Trainer::update(const ExecutionResult& result, StepRecord& rec) {
  if (host_weights_) {
    // The schedule ran every stage's update on the host: make them current.
    host_weights_->commit();
    observe_update_times(result);
    rec.peak_bytes = result.peak;
    return 0;
  }
  // Only with room for the update's temporary (and, with a sharded
  // optimizer, the flat copies of the buckets the updated weights travel
  // in, cut as the gradient sums' pieces, which every rank agreed on), so
  // none stops half way. The gradients were summed during the schedule.
  const Bytes before_update = memory_.live();
  Bytes temporary = optimizer_->update_temp_bytes();
  temporary = std::max(temporary, ranks_->share_temporary_bytes(*model_));
  refuse_update_without_room(memory_, budget_.step_bytes(), temporary, "step " + std::to_string(rec.step));
  memory_.reset_peak();
  optimizer_->step();
  if (optimizer_->sharded()) {
    const Clock::time_point t0 = Clock::now();
    ranks_->share_weights(*model_);
    rec.share_seconds = seconds_since(t0);
  }
  const Bytes update_peak = memory_.peak();
  optimizer_->zero_grad();
  rec.peak_bytes = std::max(result.peak, update_peak);
  return update_peak - before_update;
}

void Trainer::check_checkpoints() const {
  TrainingModes modes = modes_of(options_);
  modes.checkpoints = true;
  check_training_modes(modes);
}

void Trainer::save_checkpoint(const std::string& path) {
  check_checkpoints();
  TrainerCheckpoint c;
  c.steps = steps_done();
  c.optimizer_steps = optimizer_->steps();
  // A sharded optimizer's moments are this rank's shard: the file says whose.
  c.shard_world = optimizer_->sharded() ? ranks_->world() : 0;
  c.shard_rank = optimizer_->sharded() ? ranks_->rank() : 0;
  c.weights = model_->parameters();
  c.buffers = model_->buffers();
  for (std::size_t k = 0; k < c.weights.size(); ++k) {
    c.first_moments.push_back(optimizer_->first_moment(k));
    c.second_moments.push_back(optimizer_->second_moment(k));
  }
  c.step_generator = generator_.get_state();
  c.default_generator = at::detail::getDefaultCPUGenerator().get_state();
  write_trainer_checkpoint(path, c);
  // Every rank's file is written before any is put in place.
  ranks_->gather({static_cast<double>(steps_done())});
  publish_checkpoint_file(path);
}

void Trainer::resume(const std::string& path) {
  check_checkpoints();
  if (!records_.empty()) throw UsageError("resume: this trainer already trained; resume before the first step");
  const TrainerCheckpoint c = read_trainer_checkpoint(path);
  const std::vector<torch::Tensor> params = model_->parameters(), buffers = model_->buffers();
  const auto fail = [&](const std::string& why) { return Error("checkpoint " + path + ": " + why); };
  const auto shard_text = [](std::int64_t world, std::int64_t rank) {
    return world == 0 ? std::string("the whole optimizer state")
                      : "rank " + std::to_string(rank) + " of " + std::to_string(world) + "'s optimizer shard";
  };
  const std::int64_t world = optimizer_->sharded() ? ranks_->world() : 0;
  const std::int64_t rank = optimizer_->sharded() ? ranks_->rank() : 0;
  if (c.shard_world != world || c.shard_rank != rank) {
    throw fail("it holds " + shard_text(c.shard_world, c.shard_rank) + "; this run keeps " + shard_text(world, rank) +
               " (resume with the ranks and the optimizer's sharding it was written with)");
  }
  if (c.weights.size() != params.size() || c.buffers.size() != buffers.size()) {
    throw fail("it holds " + std::to_string(c.weights.size()) + " weights and " + std::to_string(c.buffers.size()) +
               " buffers; this model has " + std::to_string(params.size()) + " and " + std::to_string(buffers.size()));
  }
  ranks_->check_agree(static_cast<double>(c.steps), "checkpoint step (resume every rank from one step)");
  torch::NoGradGuard no_grad;
  const auto copy_into = [&](const torch::Tensor& to, const torch::Tensor& from, const std::string& what) {
    if (!to.sizes().equals(from.sizes()) || to.scalar_type() != from.scalar_type())
      throw fail(what + " has shape " + c10::str(from.sizes()) + "; this model's is " + c10::str(to.sizes()));
    to.copy_(from);
  };
  for (std::size_t k = 0; k < params.size(); ++k) {
    copy_into(params[k], c.weights[k], "weight " + std::to_string(k));
    copy_into(optimizer_->first_moment(k), c.first_moments[k], "moment " + std::to_string(k));
    copy_into(optimizer_->second_moment(k), c.second_moments[k], "moment " + std::to_string(k));
  }
  for (std::size_t k = 0; k < buffers.size(); ++k) copy_into(buffers[k], c.buffers[k], "buffer " + std::to_string(k));
  generator_.set_state(c.step_generator);
  at::Generator global = at::detail::getDefaultCPUGenerator();
  global.set_state(c.default_generator);
  optimizer_->restore_steps(c.optimizer_steps);
  // The data position: the batches already trained, drawn and dropped.
  const auto scope = memory_.activate();
  for (std::int64_t s = 0; s < c.steps; ++s) source_.next(memory_.device());
  first_step_ = c.steps;
}

CopyStats planned_copies(const std::vector<StepRecord>& records) {
  CopyStats total;
  for (const StepRecord& r : records) {
    if (r.plan != PlanKind::Collect) total += r.copies;
  }
  return total;
}

TrainSummary Trainer::summary() const {
  TrainSummary s;
  s.budget_bytes = budget_bytes();
  s.reference_peak_bytes = budget_.reference();
  s.resident_bytes = step_planner_->resident_bytes();
  s.steps = static_cast<long>(records_.size());
  s.retries = retries_;
  Seconds total = 0, new_total = 0, cached_total = 0;
  long new_plans = 0;
  for (const StepRecord& r : records_) {
    if (r.plan == PlanKind::Collect) ++s.collection_steps;
    s.max_peak_bytes = std::max(s.max_peak_bytes, r.peak_bytes);
    if (r.violation) ++s.violations;
    total += r.seconds;
    s.data_wait_seconds += r.data_wait_seconds;
    s.lease_wait_seconds += r.lease_wait_seconds;
    if (r.plan == PlanKind::New) {
      new_total += r.planning_seconds;
      ++new_plans;
    }
    if (r.plan == PlanKind::Cached) cached_total += r.planning_seconds;
    if (r.plan != PlanKind::Collect) s.planned_reduce += r.reduce;
  }
  s.cache_hits = step_planner_->cache_hits();
  s.cache_misses = step_planner_->cache_misses();
  s.median_prediction_error = prediction_error_.median();
  s.max_prediction_error = prediction_error_.max();
  s.predictor_fit_error = predictor().memory_fit_error();
  s.mean_step_seconds = records_.empty() ? 0 : total / static_cast<double>(records_.size());
  s.planned_copies = planned_copies(records_);
  s.median_time_prediction_error = time_prediction_error_.median();
  s.to_host_bandwidth = step_planner_->to_host_bandwidth();
  s.to_device_bandwidth = step_planner_->to_device_bandwidth();
  s.data_wait_fraction = total > 0 ? s.data_wait_seconds / total : 0;
  s.mean_new_plan_seconds = new_plans ? new_total / static_cast<double>(new_plans) : 0;
  s.mean_cached_plan_seconds = s.cache_hits ? cached_total / static_cast<double>(s.cache_hits) : 0;
  s.optimizer_state_bytes = optimizer_->state_bytes();
  return s;
}

}  // namespace memtrain::runtime
