#include "runtime/step/step_planner.h"

#include <algorithm>
#include <chrono>

#include "core/chain_scaling.h"
#include "core/error.h"
#include "core/seconds_since.h"
#include "plan/frugal_schedule.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "plan/weight_swap_schedules.h"
#include "runtime/execution/chain_measurement.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void check_step_planner_options(const StepPlannerOptions& o) {
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
  if (!(o.device_to_host_bandwidth >= 0 && o.host_to_device_bandwidth >= 0)) {
    throw UsageError("host link bandwidth " + format_number("%g", o.device_to_host_bandwidth) + " / " +
                     format_number("%g", o.host_to_device_bandwidth) +
                     " bytes/s is out of range; expected > 0, or 0 for none");
  }
}

const char* plan_kind_name(PlanKind kind) {
  switch (kind) {
    case PlanKind::Collect: return "collect";
    case PlanKind::New: return "new";
    case PlanKind::Cached: return "cached";
    case PlanKind::Retry: return "retry";
    case PlanKind::Frugal: return "frugal";
  }
  MEMTRAIN_ASSERT(false, "every PlanKind has a name");
}

StepPlanner::StepPlanner(StepPlannerOptions options, const StagedModel& model,
                         std::vector<predict::StageConstants> constants, WeightPlacement placement)
    : options_((check_step_planner_options(options), std::move(options))), model_(model), placement_(placement),
      planner_(plan::make_planner(options_.planner, options_.planner_options)),
      predictor_(std::move(constants), options_.margin),
      link_(options_.device_to_host_bandwidth, options_.host_to_device_bandwidth) {
  if (placement_.on_host) update_times_.assign(model_.size(), 0);
}

Chain StepPlanner::completed(Chain chain, std::int64_t size, predict::BytesEnvelope::Bound bound) const {
  chain.resident_bytes = resident_bytes(size) + caller_gradients_;
  chain.device_to_host_bandwidth = link_.device_to_host();
  chain.host_to_device_bandwidth = link_.host_to_device();
  chain.copy_issue_time = copy_issue_.seconds();
  chain.weights_on_host = placement_.on_host;
  chain.updates_inline = placement_.on_host && placement_.updates_inline;
  if (placement_.on_host) {
    for (int i = 0; i < chain.size(); ++i) chain.stages[i].update_time = update_times_.at(i);
  }
  chain.update_temp_bytes = std::max(chain.update_temp_bytes, between_steps_);
  for (size_t i = 0; i < gathered_forward_.size(); ++i) {
    Stage& stage = chain.stages[i];
    stage.forward_temp_bytes += gathered_forward_[i];
    stage.nograd_forward_temp_bytes += gathered_forward_[i];
    stage.backward_temp_bytes += gathered_backward_[i];
    for (StageVariant& v : stage.variants) {
      v.forward_temp_bytes += gathered_forward_[i];
      v.backward_temp_bytes += gathered_backward_[i];
    }
  }
  if (options_.last_stage_is_callers && !(after_stages_.empty() && after_stages_stand_in_.empty())) {
    // What the caller's code held, as one forward with grad that keeps it
    // all until its backward: its peak, counted from where it began. Above
    // the sizes the steps measured, calibration's stand-in at a larger size
    // bounds it better than a proportion of a small step.
    Bytes after = after_stages_.extended_by(after_stages_stand_in_).predict(size, bound);
    if (output_held_) {
      // The held output, where the stand-in predicts this size: once, in
      // the resident bytes when the last step's is alive still.
      const Bytes held = after_stages_.extended_by(after_stages_output_held_).predict(size, bound);
      after = std::max(after, held - std::min(previous_output_bytes_, std::max<Bytes>(0, held - after)));
    }
    Stage& callers = chain.stages.back();
    callers.saved_bytes = std::max(callers.input_bytes, after);
    callers.forward_temp_bytes = 0;
  }
  return chain;
}

void StepPlanner::set_gathered_bytes(std::vector<Bytes> forward, std::vector<Bytes> backward) {
  MEMTRAIN_ASSERT(forward.size() == static_cast<size_t>(model_.size()) && backward.size() == forward.size(),
                  "gathered bytes for every stage");
  gathered_forward_ = std::move(forward);
  gathered_backward_ = std::move(backward);
  // A stage's weights are there only around its own runs: it may be
  // recomputed only then.
  options_.planner_options.local_recompute = true;
  planner_ = plan::make_planner(options_.planner, options_.planner_options);
  if (!planner_->recomputes_locally()) {
    std::string able;
    for (const std::string& name : plan::planner_names()) {
      if (plan::planner_traits(name).recomputes_locally(options_.planner_options)) {
        able += (able.empty() ? "" : ", ") + name;
      }
    }
    throw UsageError("planner " + options_.planner + " recomputes stages on the way to later ones, whose weights " +
                     "are gathered only around their own runs (FSDP2); expected one of: " + able);
  }
}

void StepPlanner::observe_after_stages(std::int64_t size, Bytes bytes) {
  MEMTRAIN_ASSERT(options_.last_stage_is_callers, "only a caller's last stage is observed apart");
  after_stages_.observe(size, bytes);
}

void StepPlanner::observe_after_stages_stand_in(std::int64_t size, Bytes bytes, Bytes output_bytes) {
  MEMTRAIN_ASSERT(options_.last_stage_is_callers, "only a caller's last stage is observed apart");
  // Calibration's rounds run in the model's precision and under bfloat16
  // autocast, and the loop's is not known yet: the least budget stated
  // holds for either (the head's casts can hold a twentieth more).
  after_stages_stand_in_.observe_in_every_step(size, bytes);
  after_stages_output_held_.observe_in_every_step(size, bytes + std::max<Bytes>(0, output_bytes));
}

Chain StepPlanner::planning_chain(std::int64_t size) {
  Chain chain = predicted_chain(cache().planning_size(size));
  const double scale = options_.prediction_scale * shortfall_;
  if (scale != 1.0) scale_activation_memory(chain, scale);
  return chain;
}

double StepPlanner::grown_shortfall(double shortfall, Bytes fixed, Bytes predicted, Bytes measured) {
  if (predicted <= fixed || measured <= predicted) return shortfall;
  const double factor = static_cast<double>(measured - fixed) / static_cast<double>(predicted - fixed);
  return std::min(kMaxShortfall, std::max(shortfall, factor));
}

void StepPlanner::observe_peak(std::int64_t size, Bytes predicted_peak, Bytes measured_peak) {
  shortfall_ = grown_shortfall(shortfall_, predicted_chain(size).persistent_bytes(), predicted_peak, measured_peak);
}

Chain StepPlanner::largest_chain() const {
  if (pinned_largest_) return *pinned_largest_;
  if (!predictor_.ready()) throw Error("the model has not been measured yet; give a sample or run a step first");
  return predicted_chain(largest_size_);
}

void StepPlanner::observe_resident(Bytes live, Bytes batch_bytes, std::int64_t size) {
  Chain chain = predictor_.predict(size);
  chain.weights_on_host = placement_.on_host;
  Bytes& most = resident_[size];
  most = std::max(most, live - (chain.persistent_bytes() + batch_bytes));
}

Bytes StepPlanner::resident_bytes() const {
  Bytes most = 0;
  for (const auto& [size, bytes] : resident_) most = std::max(most, bytes);
  return most;
}

Bytes StepPlanner::resident_bytes(std::int64_t size) const {
  // Below every size seen: what the smallest showed.
  Bytes most = resident_.empty() ? 0 : resident_.begin()->second;
  for (auto it = resident_.begin(); it != resident_.end() && it->first <= size; ++it) most = std::max(most, it->second);
  return most;
}

void StepPlanner::observe_update_time(int stage, Seconds seconds) {
  Seconds& t = update_times_.at(stage);
  t = t > 0 ? std::min(t, seconds) : seconds;
}

predict::PlanCache& StepPlanner::cache() {
  if (bucket_width_ == 0) {
    bucket_width_ = options_.bucket > 0 ? options_.bucket : std::max<std::int64_t>(1, largest_size_ / 64);
  }
  std::unique_ptr<predict::PlanCache>& c = caches_[budget_];
  if (!c) c = std::make_unique<predict::PlanCache>(bucket_width_);
  return *c;
}

int StepPlanner::variant_rounds() const { return collection_rounds(model_, planner_->uses_variants()); }

Schedule StepPlanner::collection_schedule(int round) const {
  if (placement_.on_host) return plan::weight_swap_collection_schedule(model_.size(), placement_.micro_batches);
  return plan::schedule_for_collection(model_.size(), collection_variants(model_, round));
}

Schedule StepPlanner::fallback_schedule() const {
  if (placement_.on_host) return plan::per_layer_swap_schedule(model_.size(), placement_.micro_batches, false);
  return plan::schedule_checkpointing_everything(model_.size());
}

const Chain& StepPlanner::largest_for_planning() {
  if (pinned_largest_) return *pinned_largest_;
  predicted_largest_ = largest_chain();
  return predicted_largest_;
}

Schedule StepPlanner::most_frugal(std::int64_t size) {
  return plan::most_frugal_schedule(*planner_, predicted_chain(cache().planning_size(size)), &largest_for_planning(),
                                    fallback_schedule());
}

Schedule StepPlanner::most_frugal_at_largest() {
  const Chain& largest = largest_for_planning();
  return plan::most_frugal_schedule(*planner_, largest, &largest, fallback_schedule());
}

Bytes StepPlanner::least_peak(std::int64_t size, predict::BytesEnvelope::Bound after) {
  const Chain chain = completed(predictor_.predict(size), size, after);
  return sim::simulate(chain,
                       plan::most_frugal_schedule(*planner_, chain, &largest_for_planning(), fallback_schedule()))
      .peak_bytes;
}

Plan StepPlanner::plan_for(std::int64_t size) {
  const Chain chain = planning_chain(size);
  return planner_->plan({chain, plan::stricter_budget(budget_, chain.persistent_bytes(), cache().strictness(size)),
                         &largest_for_planning()});
}

StepChoice StepPlanner::choose(std::int64_t size, long steps_before) {
  const Clock::time_point t0 = Clock::now();
  if (steps_before < options_.collect_steps || !predictor_.ready()) {
    // Collection steps take the variants in turn, so each is seen at several sizes.
    const int round = static_cast<int>(steps_before % variant_rounds());
    return {collection_schedule(round), PlanKind::Collect, seconds_since(t0)};
  }
  if (options_.last_stage_is_callers && planner_->respects_budget() && !after_stages_.covers(size)) {
    // The caller's code has not been seen this large: its bytes are a guess.
    return {most_frugal(size), PlanKind::Frugal, seconds_since(t0)};
  }
  if (const Plan* hit = cache().find(size)) {
    // A plan made before more became resident may no longer fit.
    if (!hit->feasible || sim::simulate(planning_chain(size), hit->schedule).peak_bytes <= budget_) {
      return {hit->schedule, PlanKind::Cached, seconds_since(t0)};
    }
  }
  Plan p = plan_for(size);
  // A planner that respects the budget but finds nothing that fits the
  // prediction runs the most frugal schedule it knows; the budget decides.
  // The cache keeps that schedule, so a hit runs it too, not the refused one.
  if (!p.feasible && planner_->respects_budget()) p.schedule = most_frugal(size);
  Schedule s = p.schedule;
  cache().store(size, std::move(p));
  return {std::move(s), PlanKind::New, seconds_since(t0)};
}

void StepPlanner::mark_failed(std::int64_t size, const StepChoice& choice) {
  if (choice.kind != PlanKind::Collect) cache().mark_bad(size);
}

StepChoice StepPlanner::retry(std::int64_t size, const StepChoice& choice, StepAttempts& attempts,
                              const std::string& where, const OutOfBudget& why) {
  const Clock::time_point t0 = Clock::now();
  if (choice.kind != PlanKind::Collect && predictor_.ready()) {
    observe_peak(size, sim::simulate(predicted_chain(size), choice.schedule).peak_bytes, why.live() + why.request());
  }
  mark_failed(size, choice);
  attempts.failed.push_back(choice.schedule);
  attempts.count_failure(options_.max_retries, where, why);
  const auto tried = [&](const Schedule& s) {
    return std::find(attempts.failed.begin(), attempts.failed.end(), s) != attempts.failed.end();
  };
  std::optional<Plan> p;
  Schedule next = fallback_schedule();
  if (predictor_.ready()) {
    p = plan_for(size);
    next = p->feasible ? p->schedule : most_frugal(size);
    // The prediction for this size may be short where the largest input's
    // measured chain is not: the least schedule there fits any smaller input.
    if (tried(next)) next = most_frugal_at_largest();
    if (tried(next)) next = fallback_schedule();
  }
  if (tried(next)) {
    throw Error(where + " does not fit the budget even with the most frugal schedule (planner " + planner_->name() +
                "'s least for this input and for the largest, or every stage checkpointed): " + why.what());
  }
  // Whichever rung it came from, the schedule the step runs next is its
  // size's plan from now on: the next step of this size runs it from the
  // cache rather than running out of budget again (and, if it does run out,
  // this ladder goes on from a stricter bucket).
  Plan kept = p && p->feasible && next == p->schedule ? std::move(*p) : Plan{};
  kept.schedule = next;
  cache().store(size, std::move(kept));
  return {std::move(next), PlanKind::Retry, choice.planning_seconds + seconds_since(t0)};
}

void StepPlanner::learn(const Signature& at, const ExecutionResult& result, Bytes update_temp_bytes) {
  predictor_.observe(at.size, sample_execution(result, model_.size(), update_temp_bytes), at.shape);
  if (options_.refine_link) {
    const CopyStats& c = result.copies;
    link_.observe(c.to_host_bytes, c.to_host_seconds, c.to_device_bytes, c.to_device_seconds);
  }
  observe_copy_issue(result);
}

void StepPlanner::observe_copy_issue(const ExecutionResult& result) { copy_issue_.observe(copy_issue_seconds(result)); }

long StepPlanner::cache_hits() const {
  long n = 0;
  for (const auto& [budget, cache] : caches_) n += cache->hits();
  return n;
}

long StepPlanner::cache_misses() const {
  long n = 0;
  for (const auto& [budget, cache] : caches_) n += cache->misses();
  return n;
}

}  // namespace memtrain::runtime
