#include "runtime/training/trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <torch/torch.h>

#include "core/chain_scaling.h"
#include "core/error.h"
#include "core/seconds_since.h"
#include "plan/frugal_schedule.h"
#include "plan/gradient_sums.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "plan/tensile_planner.h"
#include "plan/weight_swap_schedules.h"
#include "runtime/execution/chain_measurement.h"
#include "runtime/model/buffer_snapshot.h"
#include "runtime/model/classification_loss.h"
#include "runtime/model/rng_snapshot.h"
#include "runtime/training/checkpoint_file.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

void check_options(const TrainerOptions& o) {
  if (o.collect_steps < 0 || o.collect_steps > kMaxCollectSteps) {
    throw UsageError("collection steps (collect_steps) " + std::to_string(o.collect_steps) +
                     " is out of range; expected 0.." + std::to_string(kMaxCollectSteps));
  }
  if (o.bucket < 0)
    throw UsageError("size bucket (bucket) " + std::to_string(o.bucket) + " is out of range; expected >= 0");
  if (!(o.margin >= 0 && o.margin <= kMaxMargin)) {
    throw UsageError("prediction margin (margin) " + std::to_string(o.margin) + " is out of range; expected 0.." +
                     format_number("%g", kMaxMargin));
  }
  if (o.max_retries < 0)
    throw UsageError("max_retries " + std::to_string(o.max_retries) + " is out of range; expected >= 0");
  if (!(o.prediction_scale > 0))
    throw UsageError("prediction_scale " + std::to_string(o.prediction_scale) + " is out of range; expected > 0");
  if (!(o.adam.lr > 0))
    throw UsageError("learning rate (adam.lr) " + std::to_string(o.adam.lr) + " is out of range; expected > 0");
  if (o.micro_batches < 1) {
    throw UsageError("micro-batches (micro_batches) " + std::to_string(o.micro_batches) +
                     " is out of range; expected >= 1");
  }
  if (o.shard_optimizer && o.weights_on_host) {
    throw UsageError(
        "a sharded optimizer with the weights in host memory is not supported: the host updates each stage "
        "whole; shard the optimizer with the weights on the device, or keep every rank's state whole");
  }
  if (o.ranks && o.lease) throw UsageError("ranks on a shared device (job groups) are not supported");
  if (o.deterministic_reduce && !o.ranks) throw UsageError("deterministic_reduce orders the ranks' sum; give ranks");
  if (o.shard_optimizer && !o.ranks)
    throw UsageError("shard_optimizer splits the optimizer state over ranks; give ranks");
  if (o.weights_on_host && !(o.device_to_host_bandwidth > 0 && o.host_to_device_bandwidth > 0)) {
    throw UsageError(
        "weights in host memory need the host link's bandwidth to plan their copies: set "
        "device_to_host_bandwidth and host_to_device_bandwidth (bytes/s; measured by memtrain calibrate)");
  }
}

}  // namespace

Trainer::Trainer(TrainerOptions options, DeviceMemory& memory, ModelFactory factory, BatchSource& source)
    : options_(std::move(options)), memory_(memory), source_(source),
      link_(options_.device_to_host_bandwidth, options_.host_to_device_bandwidth) {
  check_options(options_);
  options_.planner_options.micro_batches = options_.micro_batches;
  planner_ = plan::make_planner(options_.planner, options_.planner_options);
  plan::check_weights_placement(*planner_, options_.weights_on_host);
  const auto scope = memory_.activate();
  std::optional<PoolScope> in_host_pool;
  if (options_.weights_on_host) in_host_pool.emplace(&memory_.host());
  torch::manual_seed(options_.seed);  // the model's initial weights
  model_ = std::make_unique<StagedModel>(factory());
  if (!options_.weights_on_host) model_->to(memory_.device());
  model_->train(true);
  if (options_.shard_optimizer) {
    std::vector<std::int64_t> numels;
    for (const torch::Tensor& p : model_->parameters()) numels.push_back(p.numel());
    for (int r = 0; r < options_.ranks->world(); ++r)
      shards_.push_back(optimizer_shard(numels, r, options_.ranks->world()));
    optimizer_ = std::make_unique<Adam>(model_->parameters(), options_.adam, shards_.at(options_.ranks->rank()));
  } else {
    optimizer_ = std::make_unique<Adam>(model_->parameters(), options_.adam);
  }
  executor_ = std::make_unique<Executor>(*model_, memory_);
  if (options_.weights_on_host) {
    host_weights_ = std::make_unique<HostWeights>(*model_, *optimizer_, memory_);
    executor_->set_host_weights(host_weights_.get());
    update_times_.assign(model_->size(), 0);
  }
  predictor_ = std::make_unique<predict::ChainPredictor>(model_constants(), options_.margin);
  generator_ = memory_.make_generator(options_.seed);
  if (options_.ranks) start_ranks();
}

void Trainer::start_ranks() {
  RankGroup& ranks = *options_.ranks;
  // The ranks must split the same global batches the same way.
  const std::vector<double> mine{static_cast<double>(options_.seed), static_cast<double>(options_.micro_batches),
                                 options_.deterministic_reduce ? 1.0 : 0.0,
                                 static_cast<double>(model_->parameter_count()), options_.shard_optimizer ? 1.0 : 0.0};
  const auto all = ranks.gather(mine);
  const char* names[] = {"seed", "micro-batches", "deterministic reduce (1: on)", "parameter count",
                         "optimizer sharding (1: on)"};
  for (int r = 0; r < ranks.world(); ++r) {
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (all[r][i] != all[0][i]) {
        throw UsageError("rank " + std::to_string(r) + " has " + names[i] + " " + format_number("%.0f", all[r][i]) +
                         " but rank 0 has " + names[i] + " " + format_number("%.0f", all[0][i]) +
                         "; every rank of a job must train the same model on the same seed the same way");
      }
    }
  }
  // Parameters and buffers start as rank 0's.
  const auto scope = memory_.activate();
  std::vector<torch::Tensor> state;
  for (const torch::Tensor& p : model_->parameters()) state.push_back(p.detach());
  for (const torch::Tensor& b : model_->buffers()) state.push_back(b);
  ranks.broadcast(state, 0);
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

std::int64_t Trainer::planning_size(const Signature& sig) const {
  const int m = options_.micro_batches;
  if (m == 1 || sig.shape.empty()) return sig.size;
  const std::int64_t rows = sig.shape[0];
  return sig.size / rows * ((rows + m - 1) / m);  // split_batch gives micro-batch 0 the spare rows
}

Schedule Trainer::collection_schedule(int round) const {
  if (host_weights_) return plan::weight_swap_collection_schedule(model_->size(), options_.micro_batches);
  return plan::schedule_for_collection(model_->size(), collection_variants(*model_, round));
}

int Trainer::variant_rounds() const { return collection_rounds(*model_, planner_->uses_variants()); }

Schedule Trainer::fallback_schedule() const {
  if (host_weights_) return plan::per_layer_swap_schedule(model_->size(), options_.micro_batches, false);
  return plan::schedule_checkpointing_everything(model_->size());
}

void Trainer::discard_gradients() {
  if (host_weights_) {
    host_weights_->abandon(frozen_);
  } else if (frozen_.empty()) {
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
    if (r.op.kind != OpKind::Update) continue;
    // The shortest seen: interference from the rest of the machine only adds time.
    Seconds& t = update_times_.at(r.op.stage);
    const Seconds measured = host_weights_->update_seconds(r.op.stage);
    t = t > 0 ? std::min(t, measured) : measured;
  }
}

Error Trainer::below_minimum(const Signature& sig, Bytes minimum) const {
  return Error("budget " + format_bytes(budget_) + " (" + std::to_string(budget_) + " bytes) is below the minimum " +
               format_bytes(minimum) + " (" + std::to_string(minimum) + " bytes) that planner " + planner_->name() +
               " needs for input " + sig.describe());
}

void Trainer::calibrate() {
  if (calibrated_) return;
  const auto scope = memory_.activate();
  const int n = model_->size();
  const Batch largest = source_.largest(memory_.device());
  largest_signature_ = largest.signature;
  const std::int64_t rows = largest.signature.shape.empty() ? 1 : largest.signature.shape[0];
  // A step split on the device runs its first (largest) part at a time.
  const Batch measured = split_steps() ? batch_rows(largest, 0, options_.micro_batches) : largest;
  if (options_.micro_batches > rows) {
    throw UsageError(std::to_string(options_.micro_batches) + " micro-batches are more than the " +
                     std::to_string(rows) + " examples of the largest batch (" + largest.signature.describe() +
                     "); expected at most " + std::to_string(rows));
  }

  // Calibration runs are measurements, not training: unenforced, no buffer
  // updates, gradients discarded, random generators rewound.
  memory_.set_enforced(false);
  // Other jobs calibrate in turn: none of them measures beside another.
  if (options_.lease) options_.lease->begin_calibration();
  const RngSnapshot rng = RngSnapshot::capture(generator_);
  auto measure = [&](const Schedule& schedule) {
    StepContext ctx = context_for(measured);
    ctx.update_buffers = false;
    ExecutionResult r = executor_->run(schedule, measured, ctx);
    discard_gradients();
    rng.restore(generator_);
    return r;
  };
  // With the weights in host memory, the step with everything on the device
  // is never run (it is what does not fit): its peak is simulated below.
  // Nor on a shared device, where it would take the others' memory.
  if (options_.budget.is_percent && !options_.least_budget && !host_weights_ && !options_.lease) {
    reference_peak_ = measure(plan::schedule_keeping_everything(n)).peak;
  }
  // One collection run per variant when the planner chooses variants.
  std::vector<predict::ChainSample> samples;
  for (int v = 0; v < variant_rounds(); ++v) {
    const Schedule collect = collection_schedule(v);
    auto collect_once = [&] {
      const ExecutionResult r = measure(collect);
      if (host_weights_) observe_update_times(r);
      copy_issue_.observe(copy_issue_seconds(r));
      // With the weights on the host the update runs there: no device temporary.
      return sample_execution(r, n, host_weights_ ? 0 : optimizer_->update_temp_bytes());
    };
    predict::ChainSample sample = collect_once();
    // Variants are chosen by their times, so each is timed twice and the
    // shorter kept: one-off costs and a busy machine would bias the choice.
    if (planner_->uses_variants()) sample = faster_of(sample, collect_once());
    samples.push_back(sample);
    predictor_->observe(planning_size(largest.signature), samples.back());
  }
  observe_resident(largest);
  largest_chain_ = completed(chain_from_samples(samples, model_constants()));
  if (options_.lease || (host_weights_ && options_.budget.is_percent && !options_.least_budget)) {
    // As `memtrain simulate` does: N% of one micro-batch's step with the
    // weights, gradients and optimizer state all on the device.
    Chain on_device = largest_chain_;
    on_device.weights_on_host = false;
    reference_peak_ = sim::simulate(on_device, plan::schedule_keeping_everything(n)).peak_bytes;
  }

  const std::int64_t width =
      options_.bucket > 0 ? options_.bucket : std::max<std::int64_t>(1, planning_size(largest.signature) / 64);
  bucket_width_ = width;
  if (options_.lease) {
    const Schedule frugal = plan::most_frugal_schedule(*planner_, largest_chain_, &largest_chain_, fallback_schedule());
    budget_ = options_.lease->calibrated(reference_peak_, sim::simulate(largest_chain_, frugal).peak_bytes,
                                         plan::swappable_tensor_bytes(largest_chain_));
    memory_.set_enforced(options_.enforce && planner_->respects_budget());
    use_budget(budget_);
    calibrated_ = true;
    return;
  }
  if (options_.least_budget) {
    const Plan least = planner_->plan({largest_chain_, 0, &largest_chain_});
    budget_ = least.feasible ? least.peak_bytes : least.min_budget_bytes;
    if (budget_ <= 0) {
      throw Error("planner " + planner_->name() + " reports no least budget for input " +
                  largest_signature_.describe() + "; give a budget");
    }
  } else {
    budget_ = options_.budget.resolve(reference_peak_);
  }
  use_budget(budget_);
  if (options_.ranks) {
    start_gradient_sums();
    // The least budget is the planner's, plus what the sums' copies hold beside the backward.
    if (options_.least_budget && sums_beside_backward_) use_budget(budget_ += sums_->reserve_bytes());
  }
  memory_.set_enforced(options_.enforce && planner_->respects_budget());
  if (planner_->respects_budget()) {
    const Plan p = planner_->plan({largest_chain_, planning_budget(), &largest_chain_});
    if (!p.feasible) throw below_minimum(largest_signature_, p.min_budget_bytes + (budget_ - planning_budget()));
  }
  calibrated_ = true;
}

void Trainer::use_budget(Bytes budget) {
  step_budget_ = budget;
  memory_.set_budget(budget);
  std::unique_ptr<predict::PlanCache>& cache = caches_[budget];
  if (!cache) cache = std::make_unique<predict::PlanCache>(bucket_width_);
  cache_ = cache.get();
}

StepLeaseRequest Trainer::lease_request(std::int64_t size, bool collecting) {
  StepLeaseRequest r;
  if (collecting) {
    // The collection schedule at the largest input: the predictor knows
    // little yet, and a collection step cannot plan around a short lease.
    Bytes most = 0;
    for (int v = 0; v < variant_rounds(); ++v)
      most = std::max(most, sim::simulate(largest_chain_, collection_schedule(v)).peak_bytes);
    r.want = r.least = most;
    r.curve = {{most, 0}};
    return r;
  }
  const std::int64_t bucket = cache_->bucket_of(size);
  if (const auto hit = lease_requests_.find(bucket); hit != lease_requests_.end()) return hit->second;
  constexpr int kPoints = 6;  // budgets the step is priced at
  r = plan::lease_curve(*planner_, planning_chain(size), &largest_chain_, most_frugal(size), kPoints);
  lease_requests_[bucket] = r;
  return r;
}

void Trainer::observe_resident(const Batch& batch) {
  memory_.synchronize();
  Chain chain = predictor_->predict(planning_size(batch.signature));
  chain.weights_on_host = host_weights_ != nullptr;
  const Bytes expected = chain.persistent_bytes() + batch.bytes();
  extra_resident_ = std::max(extra_resident_, memory_.live() - expected);
}

Chain Trainer::completed(Chain chain) const {
  chain.resident_bytes = extra_resident_;
  chain.device_to_host_bandwidth = link_.device_to_host();
  chain.host_to_device_bandwidth = link_.host_to_device();
  chain.copy_issue_time = copy_issue_.seconds();
  chain.weights_on_host = host_weights_ != nullptr;
  chain.updates_inline = host_weights_ != nullptr && !host_weights_->updates_on_own_thread();
  if (host_weights_) {
    for (int i = 0; i < chain.size(); ++i) chain.stages[i].update_time = update_times_.at(i);
  }
  return chain;
}

Chain Trainer::planning_chain(std::int64_t size) {
  Chain chain = predicted_chain(cache_->planning_size(size));
  if (options_.prediction_scale != 1.0) scale_activation_memory(chain, options_.prediction_scale);
  return chain;
}

Plan Trainer::plan_for(std::int64_t size) {
  const Chain chain = planning_chain(size);
  return planner_->plan(
      {chain, plan::stricter_budget(planning_budget(), chain, cache_->strictness(size)), &largest_chain_});
}

void Trainer::start_gradient_sums() {
  std::vector<std::vector<torch::Tensor>> stage_weights;
  for (int i = 0; i < model_->size(); ++i) stage_weights.push_back(model_->stage(i).parameters());
  // Pieces as large as kBucketBytes (few round trips), halved until the
  // copies in flight take at most 1/32 of this rank's budget and leave the
  // planner room for the largest input (pieces of 0 bytes: every weight
  // summed alone, in place, no copies); the ranks then take the smallest,
  // so they cut the gradients the same way.
  constexpr Bytes kShareOfBudget = 32;
  const bool receives = options_.ranks->rank() > 0;
  // With the weights in host memory each stage's gradients leave for the host on their own.
  const bool per_stage = host_weights_ != nullptr;
  const auto reserve = [&](Bytes piece) {
    return RankGradientSums::reserve_bytes(stage_weights, piece, options_.deterministic_reduce, receives, per_stage);
  };
  const auto room_beside_backward = [&](Bytes piece) {
    if (!options_.sum_beside_backward) return false;
    return !planner_->respects_budget() || options_.least_budget ||
           planner_->plan({largest_chain_, budget_ - reserve(piece), &largest_chain_}).feasible;
  };
  Bytes piece = kBucketBytes;
  while (piece > 0 && (reserve(piece) > budget_ / kShareOfBudget ||
                       (options_.sum_beside_backward && !room_beside_backward(piece)))) {
    piece /= 2;
  }
  for (const std::vector<double>& theirs : options_.ranks->gather({static_cast<double>(piece)}))
    piece = std::min(piece, static_cast<Bytes>(theirs[0]));
  bucket_bytes_ = piece;
  // No room for even the smallest copies beside the largest input's
  // backward: this rank sums after its backward instead (the others need
  // not: every rank sums the same buckets in the same order either way).
  sums_beside_backward_ = room_beside_backward(piece);
  sums_ = std::make_unique<RankGradientSums>(*options_.ranks, std::move(stage_weights), piece,
                                             options_.deterministic_reduce, per_stage);
}

Schedule Trainer::summing(const Schedule& schedule) const {
  return sums_beside_backward_ ? plan::with_gradient_sums(schedule, sums_->first_stages())
                               : plan::with_gradient_sums_at_end(schedule, sums_->first_stages());
}

void Trainer::freeze_summed(const std::vector<int>& stages) {
  torch::NoGradGuard no_grad;
  for (int s : stages) {
    for (torch::Tensor& w : model_->stage(s).parameters()) {
      if (!w.requires_grad()) continue;
      w.requires_grad_(false);
      frozen_.push_back(w);
    }
  }
}

void Trainer::thaw_summed() {
  for (torch::Tensor& w : frozen_) w.requires_grad_(true);
  frozen_.clear();
}

Schedule Trainer::most_frugal(std::int64_t size) {
  return plan::most_frugal_schedule(*planner_, predicted_chain(cache_->planning_size(size)), &largest_chain_,
                                    fallback_schedule());
}

Trainer::Choice Trainer::choose(std::int64_t size) {
  const Clock::time_point t0 = Clock::now();
  if (static_cast<int>(records_.size()) < options_.collect_steps) {
    // Collection steps take the variants in turn, so each is seen at several sizes.
    const int round = static_cast<int>(records_.size()) % variant_rounds();
    return {collection_schedule(round), PlanKind::Collect, seconds_since(t0)};
  }
  if (const Plan* hit = cache_->find(size)) return {hit->schedule, PlanKind::Cached, seconds_since(t0)};
  Plan p = plan_for(size);
  // A planner that respects the budget but finds nothing that fits the
  // prediction runs the most frugal schedule it knows; the budget decides.
  // The cache keeps that schedule, so a hit runs it too, not the refused one.
  if (!p.feasible && planner_->respects_budget()) p.schedule = most_frugal(size);
  Schedule s = p.schedule;
  cache_->store(size, std::move(p));
  return {std::move(s), PlanKind::New, seconds_since(t0)};
}

StepRecord Trainer::step() {
  calibrate();
  const auto scope = memory_.activate();
  const Clock::time_point t0 = Clock::now();
  const Batch batch = source_.next(memory_.device());
  StepRecord rec;
  rec.data_wait_seconds = seconds_since(t0);
  rec.step = steps_done() + 1;
  rec.epoch = source_.epoch();
  rec.signature = batch.signature;
  const std::int64_t size = planning_size(batch.signature);
  observe_resident(batch);
  // A shared device: the step runs under what the group leases it, and the
  // lease shrinks again however the step ends.
  struct Settle {
    StepLease* lease;
    bool taken = false;
    ~Settle() {
      if (!lease) return;
      try {
        lease->settle(taken);
      } catch (const std::exception&) {
      }
    }
  } settle{options_.lease};
  if (options_.lease) {
    const bool collecting = static_cast<int>(records_.size()) < options_.collect_steps;
    const StepLeaseRequest request = lease_request(size, collecting);
    rec.lease_want_bytes = request.want;
    rec.lease_least_bytes = request.least;
    use_budget(options_.lease->acquire(request, &rec.lease_wait_seconds));
  }
  rec.budget_bytes = step_budget_;

  const StepParts parts = split(batch);
  Choice choice = choose(size);
  rec.plan = choice.kind;
  rec.planning_seconds = choice.planning_seconds;
  // What the sums are predicted to cost: the network as the steps before this one showed it.
  const GradientReduction reduction = sums_ ? sums_->reduction() : GradientReduction{};
  const StepRun run = run_with_retries(parts, size, choice, rec);
  const ExecutionResult& result = run.result;
  record_run(choice.schedule, size, result, static_cast<int>(parts.batches.size()), reduction, rec);
  update(size, result, rec);

  rec.violation = rec.peak_bytes > step_budget_;
  settle.taken = true;
  if (rec.plan != PlanKind::Collect) {
    prediction_error_.record(rec.predicted_peak_bytes, rec.peak_bytes);
    time_prediction_error_.record(rec.predicted_schedule_seconds, rec.schedule_seconds);
  }
  record_outcome(run, rec);
  rec.seconds = seconds_since(t0);
  records_.push_back(rec);
  if (on_step) on_step(rec);
  return rec;
}

Trainer::StepParts Trainer::split(const Batch& batch) {
  StepParts p;
  if (!split_steps()) {
    p.batches = {batch};
    p.loss_weights = {1};
    if (host_weights_ && options_.ranks) split_among_ranks(batch, p);
    return p;
  }
  const int m = options_.micro_batches;
  const int world = options_.ranks ? options_.ranks->world() : 1;
  const int rank = options_.ranks ? options_.ranks->rank() : 0;
  // Every global part's seed, drawn by every rank from its copy of the
  // step's generator: part g of the job draws the same masks whichever
  // process runs it.
  const torch::Tensor seeds =
      torch::empty({world * m}, torch::TensorOptions().dtype(torch::kLong).device(generator_.device()))
          .random_(0, std::int64_t{1} << 62, generator_)
          .cpu();
  std::vector<double> counted;
  for (int i = 0; i < m; ++i) {
    p.batches.push_back(m > 1 ? batch_rows(batch, i, m) : batch);
    p.seeds.push_back(static_cast<std::uint64_t>(seeds[rank * m + i].item<std::int64_t>()));
    counted.push_back(p.batches.back().targets.ne(kIgnoreTarget).sum().item<double>());
  }
  double all = 0;
  for (const std::vector<double>& theirs : across_ranks(counted)) {
    for (double c : theirs) all += c;
  }
  for (double c : counted) p.loss_weights.push_back(c / std::max(1.0, all));
  return p;
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
    ExecutionResult r = sums_ && last ? executor_->run(summing(schedule), batch, ctx, sums_.get())
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

void Trainer::split_among_ranks(const Batch& batch, StepParts& p) {
  // The schedule splits this rank's slice into micro-batches itself; they
  // draw the seeds and carry the shares of the job's global micro-batches
  // (rank r's m-th is the job's r*M+m-th), as one process running them all would.
  const int m = options_.micro_batches, world = options_.ranks->world(), rank = options_.ranks->rank();
  const torch::Tensor seeds =
      torch::empty({world * m}, torch::TensorOptions().dtype(torch::kLong).device(generator_.device()))
          .random_(0, std::int64_t{1} << 62, generator_)
          .cpu();
  for (int i = 0; i < m; ++i)
    p.micro_seeds.push_back(static_cast<std::uint64_t>(seeds[rank * m + i].item<std::int64_t>()));
  const double mine = batch.targets.ne(kIgnoreTarget).sum().item<double>();
  double all = 0;
  for (const std::vector<double>& theirs : across_ranks({mine})) all += theirs[0];
  p.micro_loss_denominator = std::max(1.0, all);
  // A schedule of one micro-batch runs the slice whole, with the step's generator and share.
  if (m == 1) {
    p.seeds = p.micro_seeds;
    p.loss_weights = {mine / p.micro_loss_denominator};
  }
}

std::vector<std::vector<double>> Trainer::across_ranks(const std::vector<double>& mine) {
  return options_.ranks ? options_.ranks->gather(mine) : std::vector<std::vector<double>>{mine};
}

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

std::vector<torch::Tensor> Trainer::shard_pieces(int r) const {
  std::vector<torch::Tensor> pieces;
  const std::vector<torch::Tensor> params = model_->parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    const ElementRange& owned = shards_[r][k];
    if (owned.size() > 0) pieces.push_back(params[k].detach().view({-1}).narrow(0, owned.begin, owned.size()));
  }
  return pieces;
}

void Trainer::share_weights(StepRecord& rec) {
  const Clock::time_point t0 = Clock::now();
  torch::NoGradGuard no_grad;
  // Rank by rank, in the same order everywhere: its updated elements, in place.
  for (int r = 0; r < static_cast<int>(shards_.size()); ++r) {
    std::vector<torch::Tensor> pieces = shard_pieces(r);
    options_.ranks->broadcast(pieces, r, bucket_bytes_);
  }
  rec.share_seconds = seconds_since(t0);
}

Trainer::StepRun Trainer::run_with_retries(const StepParts& parts, std::int64_t size, Choice& choice, StepRecord& rec) {
  const RngSnapshot start = RngSnapshot::capture(generator_);
  const BufferSnapshot buffers = BufferSnapshot::capture(*model_, memory_);
  // However the step ends, every weight takes gradients again.
  struct Thaw {
    Trainer& t;
    ~Thaw() { t.thaw_summed(); }
  } thaw{*this};
  if (sums_) sums_->begin_step();
  std::vector<Schedule> failed;  // schedules this step already ran out of budget with
  auto tried = [&](const Schedule& s) { return std::find(failed.begin(), failed.end(), s) != failed.end(); };
  while (true) {
    try {
      return run_parts(choice.schedule, parts);
    } catch (const OutOfBudget& oob) {
      // Roll back: no gradient (or staged update, or batch-norm statistic)
      // of the failed attempt survives, and the retry draws the same random
      // numbers. Gradients already summed over the ranks were final and stand.
      if (sums_) freeze_summed(sums_->settle_failed_attempt());
      discard_gradients();
      buffers.restore();
      start.restore(generator_);
      ++rec.retries;
      ++retries_;
      const Clock::time_point tp = Clock::now();
      failed.push_back(choice.schedule);
      if (choice.kind != PlanKind::Collect) cache_->mark_bad(size);
      Plan p = plan_for(size);
      Schedule next = p.feasible ? p.schedule : most_frugal(size);
      if (tried(next)) next = fallback_schedule();
      const std::string where = "step " + std::to_string(rec.step) + ": input " + rec.signature.describe();
      if (tried(next)) {
        throw Error(where + " does not fit the budget even with the most frugal schedule (planner " + planner_->name() +
                    "'s least, or every stage checkpointed): " + oob.what());
      }
      if (rec.retries > options_.max_retries) {
        throw Error(where + " still ran out of budget after " + std::to_string(options_.max_retries) +
                    " stricter plans: " + oob.what());
      }
      if (p.feasible && next == p.schedule) cache_->store(size, std::move(p));
      choice = {std::move(next), PlanKind::Retry, choice.planning_seconds + seconds_since(tp)};
      rec.plan = PlanKind::Retry;
      rec.planning_seconds = choice.planning_seconds;
    } catch (...) {
      // A schedule that cannot run at all: nothing of it survives either.
      discard_gradients();
      buffers.restore();
      start.restore(generator_);
      throw;
    }
  }
}

void Trainer::record_run(const Schedule& schedule, std::int64_t size, const ExecutionResult& result, int parts,
                         const GradientReduction& reduction, StepRecord& rec) {
  rec.schedule = schedule.to_string();
  rec.recomputed_forwards = schedule.recomputed_forwards(model_->size());
  const Chain chain = predicted_chain(size);
  const sim::SimResult predicted = sim::simulate(chain, schedule);
  rec.predicted_peak_bytes = predicted.peak_bytes;
  rec.predicted_schedule_seconds = predicted.time * parts;
  if (!reduction.empty()) {
    // The last part sums the gradients as its backward makes them final.
    Chain ranked = chain;
    ranked.reduction = reduction;
    const Schedule with_sums = summing(schedule);
    const sim::SimResult summed = sim::simulate(ranked, with_sums);
    rec.schedule = with_sums.to_string();
    rec.predicted_peak_bytes = std::max(predicted.peak_bytes, summed.peak_bytes);
    rec.predicted_schedule_seconds = predicted.time * (parts - 1) + summed.time;
    rec.predicted_reduce_stall_seconds = summed.reduce.stall_seconds;
  }
  rec.reduce = result.reduce;
  if (options_.lease) {
    const sim::SimResult plain = sim::simulate(chain, plan::schedule_keeping_everything(model_->size()));
    rec.predicted_plain_seconds = plain.time;
    rec.predicted_plain_peak_bytes = plain.peak_bytes;
  }
  rec.schedule_seconds = result.seconds;
  rec.copies = result.copies;
  if (options_.refine_link) {
    const CopyStats& c = result.copies;
    link_.observe(c.to_host_bytes, c.to_host_seconds, c.to_device_bytes, c.to_device_seconds);
  }
  copy_issue_.observe(copy_issue_seconds(result));
}

void Trainer::update(std::int64_t size, const ExecutionResult& result, StepRecord& rec) {
  if (host_weights_) {
    // The schedule ran every stage's update on the host: make them current.
    host_weights_->commit();
    observe_update_times(result);
    predictor_->observe(size, sample_execution(result, model_->size(), 0));
    rec.peak_bytes = result.peak;
    return;
  }
  // Only with room for the update's temporary (and, with a sharded
  // optimizer, the flat copies of the buckets the updated weights travel
  // in, cut as the gradient sums' pieces, which every rank agreed on), so
  // none stops half way. The gradients were summed during the schedule.
  memory_.synchronize();
  const Bytes before_update = memory_.live();
  Bytes temporary = optimizer_->update_temp_bytes();
  for (std::size_t r = 0; r < shards_.size(); ++r) {
    temporary = std::max(temporary, bucket_temporary_bytes(shard_pieces(static_cast<int>(r)), false, bucket_bytes_));
  }
  if (memory_.enforced() && before_update + temporary > step_budget_) {
    throw Error("step " + std::to_string(rec.step) + ": budget " + format_bytes(step_budget_) +
                " leaves no room for the optimizer update (" + format_bytes(temporary) + " on top of " +
                format_bytes(before_update) + ")");
  }
  memory_.reset_peak();
  optimizer_->step();
  if (optimizer_->sharded()) share_weights(rec);
  memory_.synchronize();
  const Bytes update_peak = memory_.peak();
  optimizer_->zero_grad();
  predictor_->observe(size, sample_execution(result, model_->size(), update_peak - before_update));
  rec.peak_bytes = std::max(result.peak, update_peak);
}

namespace {

constexpr std::int64_t kCheckpointVersion = 2;
constexpr std::int64_t kCheckpointHeader = 7;

}  // namespace

void Trainer::save_checkpoint(const std::string& path) {
  if (host_weights_)
    throw UsageError("checkpoints keep weights on the device; weights in host memory are not supported");
  const std::vector<torch::Tensor> params = model_->parameters(), buffers = model_->buffers();
  // A sharded optimizer's moments are this rank's shard: the header says whose.
  std::vector<torch::Tensor> out{torch::tensor(
      {kCheckpointVersion, steps_done(), std::int64_t{optimizer_->steps()}, static_cast<std::int64_t>(params.size()),
       static_cast<std::int64_t>(buffers.size()), std::int64_t{shard_world()}, std::int64_t{shard_rank()}},
      torch::kLong)};
  out.insert(out.end(), params.begin(), params.end());
  out.insert(out.end(), buffers.begin(), buffers.end());
  for (std::size_t k = 0; k < params.size(); ++k) out.push_back(optimizer_->first_moment(k));
  for (std::size_t k = 0; k < params.size(); ++k) out.push_back(optimizer_->second_moment(k));
  out.push_back(generator_.get_state());
  out.push_back(at::detail::getDefaultCPUGenerator().get_state());
  write_checkpoint_file(path, out);
  // Every rank's file is written before any is put in place.
  if (options_.ranks) options_.ranks->gather({static_cast<double>(steps_done())});
  publish_checkpoint_file(path);
}

void Trainer::resume(const std::string& path) {
  if (host_weights_)
    throw UsageError("checkpoints keep weights on the device; weights in host memory are not supported");
  if (!records_.empty()) throw UsageError("resume: this trainer already trained; resume before the first step");
  const std::vector<torch::Tensor> in = read_checkpoint_file(path);
  const std::vector<torch::Tensor> params = model_->parameters(), buffers = model_->buffers();
  const std::size_t n = params.size(), nb = buffers.size();
  const auto fail = [&](const std::string& why) { return Error("checkpoint " + path + ": " + why); };
  if (in.empty() || in[0].dim() != 1 || in[0].numel() < 1 || in[0].scalar_type() != torch::kLong)
    throw fail("no header");
  const torch::Tensor meta = in[0];
  if (meta[0].item<std::int64_t>() != kCheckpointVersion || meta.numel() != kCheckpointHeader) {
    throw fail("version " + std::to_string(meta[0].item<std::int64_t>()) + "; this memtrain reads version " +
               std::to_string(kCheckpointVersion));
  }
  const auto shard_text = [](std::int64_t world, std::int64_t rank) {
    return world == 0 ? std::string("the whole optimizer state")
                      : "rank " + std::to_string(rank) + " of " + std::to_string(world) + "'s optimizer shard";
  };
  if (meta[5].item<std::int64_t>() != shard_world() || meta[6].item<std::int64_t>() != shard_rank()) {
    throw fail("it holds " + shard_text(meta[5].item<std::int64_t>(), meta[6].item<std::int64_t>()) +
               "; this run keeps " + shard_text(shard_world(), shard_rank()) +
               " (resume with the ranks and --shard-optimizer it was written with)");
  }
  if (meta[3].item<std::int64_t>() != static_cast<std::int64_t>(n) ||
      meta[4].item<std::int64_t>() != static_cast<std::int64_t>(nb) || in.size() != 1 + 3 * n + nb + 2) {
    throw fail("it holds " + std::to_string(meta[3].item<std::int64_t>()) + " weights and " +
               std::to_string(meta[4].item<std::int64_t>()) + " buffers; this model has " + std::to_string(n) +
               " and " + std::to_string(nb));
  }
  const std::int64_t step = meta[1].item<std::int64_t>();
  if (options_.ranks) {
    const auto all = options_.ranks->gather({static_cast<double>(step)});
    for (int r = 0; r < options_.ranks->world(); ++r) {
      if (all[r][0] != all[0][0]) {
        throw Error("rank " + std::to_string(r) + "'s checkpoint is at step " + format_number("%.0f", all[r][0]) +
                    " but rank 0's at step " + format_number("%.0f", all[0][0]) + "; resume every rank from one step");
      }
    }
  }
  torch::NoGradGuard no_grad;
  const auto copy_into = [&](const torch::Tensor& to, const torch::Tensor& from, const std::string& what) {
    if (!to.sizes().equals(from.sizes()) || to.scalar_type() != from.scalar_type())
      throw fail(what + " has shape " + c10::str(from.sizes()) + "; this model's is " + c10::str(to.sizes()));
    to.copy_(from);
  };
  std::size_t at = 1;
  for (std::size_t k = 0; k < n; ++k) copy_into(params[k], in[at++], "weight " + std::to_string(k));
  for (std::size_t k = 0; k < nb; ++k) copy_into(buffers[k], in[at++], "buffer " + std::to_string(k));
  for (std::size_t k = 0; k < n; ++k) copy_into(optimizer_->first_moment(k), in[at++], "moment " + std::to_string(k));
  for (std::size_t k = 0; k < n; ++k) copy_into(optimizer_->second_moment(k), in[at++], "moment " + std::to_string(k));
  generator_.set_state(in[at++]);
  at::Generator global = at::detail::getDefaultCPUGenerator();
  global.set_state(in[at++]);
  optimizer_->restore_steps(meta[2].item<std::int64_t>());
  // The data position: the batches already trained, drawn and dropped.
  const auto scope = memory_.activate();
  for (std::int64_t s = 0; s < step; ++s) source_.next(memory_.device());
  first_step_ = step;
}

const char* plan_kind_name(PlanKind kind) {
  switch (kind) {
    case PlanKind::Collect: return "collect";
    case PlanKind::New: return "new";
    case PlanKind::Cached: return "cached";
    case PlanKind::Retry: return "retry";
  }
  MEMTRAIN_ASSERT(false, "every PlanKind has a name");
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
  s.budget_bytes = budget_;
  s.reference_peak_bytes = reference_peak_;
  s.resident_bytes = extra_resident_;
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
  }
  for (const auto& [budget, cache] : caches_) {
    s.cache_hits += cache->hits();
    s.cache_misses += cache->misses();
  }
  s.median_prediction_error = prediction_error_.median();
  s.max_prediction_error = prediction_error_.max();
  s.predictor_fit_error = predictor_->memory_fit_error();
  s.mean_step_seconds = records_.empty() ? 0 : total / static_cast<double>(records_.size());
  s.planned_copies = planned_copies(records_);
  for (const StepRecord& r : records_) {
    if (r.plan != PlanKind::Collect) s.planned_reduce += r.reduce;
  }
  s.median_time_prediction_error = time_prediction_error_.median();
  s.to_host_bandwidth = link_.device_to_host();
  s.to_device_bandwidth = link_.host_to_device();
  s.data_wait_fraction = total > 0 ? s.data_wait_seconds / total : 0;
  s.mean_new_plan_seconds = new_plans ? new_total / static_cast<double>(new_plans) : 0;
  s.mean_cached_plan_seconds = s.cache_hits ? cached_total / static_cast<double>(s.cache_hits) : 0;
  s.optimizer_state_bytes = optimizer_->state_bytes();
  return s;
}

}  // namespace memtrain::runtime
