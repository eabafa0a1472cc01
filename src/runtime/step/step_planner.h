// Mimose's step loop, the part both front ends share: the Trainer (the CLI's
// built-in models) and the Python module (the user's own model) plan every
// step through one StepPlanner.
//
// Per step: the first `collect_steps` steps (and any before the predictor
// can predict) run the collection schedule, every stage checkpointed, so any
// size fits while the predictor learns. After that a size's bucket (of
// `bucket` sizes, or 1/64 of the largest size seen) either has a cached plan
// or gets one, made for the bucket's largest size from the predictor's chain
// completed with what the step planner has measured itself: the host link,
// the time to issue a copy and the device bytes resident beyond the model.
//
// A step that ran out of budget asks retry() for the next schedule: the
// bucket is made stricter (its plans aim an eighth of the activations lower
// per failure), and the step runs a new plan, or the planner's most frugal
// schedule for its size, or that for the largest input (the input the
// budget was fixed for: it fits there and on anything smaller), or every
// stage checkpointed, whichever it has not run out with yet; that schedule
// becomes the size's cached plan. A step that ran out with all of them, or
// more than `max_retries` times, is an Error. A finished step teaches the
// predictor its measured sample, and the link estimate and the copy-issue
// estimate its copies (learn()).
//
// One plan cache per planning budget, so a shared device whose leases
// change the budget never runs a plan made for another budget. A cached plan
// is run only while it still fits the chain completed with what is resident
// now (an optimizer's state appears after the first step, gradients
// accumulate between updates); otherwise its size is planned again.
//
// With `last_stage_is_callers`, the chain's last stage stands for the
// caller's own code after the planned stages (a language model's head, its
// loss and their backward, in the Python module): what that code holds is
// learned per size as a BytesEnvelope from the steps themselves, never
// fitted, and a step at a size above every size it was measured at runs the
// least-memory schedule (PlanKind::Frugal) until a step has measured it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/chain.h"
#include "core/error.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/signature.h"
#include "core/units.h"
#include "plan/planner.h"
#include "predict/bytes_envelope.h"
#include "predict/chain_predictor.h"
#include "predict/copy_issue_estimate.h"
#include "predict/link_estimate.h"
#include "predict/plan_cache.h"
#include "runtime/execution/executor.h"
#include "runtime/model/staged_model.h"
#include "runtime/step/step_attempts.h"
#include "runtime/step/step_record.h"

namespace memtrain::runtime {

constexpr int kMaxCollectSteps = 10;  // the most collection steps a step planner takes
constexpr double kMaxMargin = 10;     // the largest memory margin, as a fraction

struct StepPlannerOptions {
  std::string planner = "mimose";
  plan::PlannerOptions planner_options;  // slots of the planners that discretise memory
  int collect_steps = 4;                 // steps with every stage checkpointed, 0..kMaxCollectSteps
  std::int64_t bucket = 0;               // plan-cache bucket width in input size; 0: the largest size / 64
  double margin = 0.10;                  // memory margin for sizes outside the observed range, 0..kMaxMargin
  int max_retries = 8;                   // stricter schedules for one step before giving up
  // The last stage is the caller's code (module comment): learned as an
  // envelope, and sizes it has not been measured at run the least-memory schedule.
  bool last_stage_is_callers = false;
  // Fault injection for tests: the chain planners see has its memory fields
  // multiplied by this, so < 1 makes plans that run out of budget.
  double prediction_scale = 1.0;
  // The host link the planners may offload over (bytes/s; 0: none), refined
  // from each step's own copies unless refine_link is false.
  double device_to_host_bandwidth = 0;
  double host_to_device_bandwidth = 0;
  bool refine_link = true;
};

// Throws UsageError naming the first option out of range.
void check_step_planner_options(const StepPlannerOptions& options);

// Whether steps need the host link's bandwidth to be planned: the planner
// may move tensors to host memory, or the weights live there. A front end
// without a given bandwidth measures it.
inline bool needs_host_link(const plan::PlannerTraits& planner, bool weights_on_host) {
  return planner.uses_host_link || weights_on_host;
}

// Where the model's weights live, which decides the schedules a step falls
// back on and what its chains say.
struct WeightPlacement {
  bool on_host = false;        // weights, gradients and Adam's state in host memory (Harmony)
  int micro_batches = 1;       // with weights on the host: the micro-batches each schedule runs
  bool updates_inline = true;  // with weights on the host: updates run on the compute thread
};

// A step's schedule and where it came from.
struct StepChoice {
  Schedule schedule;
  PlanKind kind = PlanKind::New;
  Seconds planning_seconds = 0;  // choosing it, retries included
};

class StepPlanner {
 public:
  // `model` (which outlives this) gives the stage count and the operator
  // variants collection steps measure; `constants` its fixed per-stage costs.
  StepPlanner(StepPlannerOptions options, const StagedModel& model, std::vector<predict::StageConstants> constants,
              WeightPlacement placement = {});

  plan::Planner& planner() { return *planner_; }
  const plan::Planner& planner() const { return *planner_; }
  const predict::ChainPredictor& predictor() const { return predictor_; }

  // Chains. completed(): `chain`, for inputs of `size`, with what this
  // planner measured beyond the predictor (link, copy issue, resident bytes,
  // weight placement).
  // With last_stage_is_callers, `after` picks the most or the least the
  // caller's code held at a size (BytesEnvelope): plans take the most.
  Chain completed(Chain chain, std::int64_t size,
                  predict::BytesEnvelope::Bound after = predict::BytesEnvelope::Bound::Most) const;
  Chain predicted_chain(std::int64_t size) const { return completed(predictor_.predict(size), size); }
  // What planners see for `size`: the prediction at its bucket's edge, its
  // activation memory scaled by prediction_scale and the learned shortfall.
  Chain planning_chain(std::int64_t size);
  // The largest input's chain: the one pin_largest() gave, else the
  // prediction at the largest size seen. Throws Error before any measurement.
  Chain largest_chain() const;
  void pin_largest(Chain chain) { pinned_largest_ = std::move(chain); }
  void note_size(std::int64_t size) { largest_size_ = std::max(largest_size_, size); }

  // Device bytes live beyond the weights, their state and the batch when a
  // step starts (a GPU library's workspaces, the caller's own tensors, what
  // the caller's forward saved before block 0), from `live` bytes with a
  // batch of `batch_bytes` of `size`. A chain for `size` takes the most seen
  // at `size` or below as its resident_bytes: what the caller saves grows
  // with the input, and a step observes its own before it is planned.
  void observe_resident(Bytes live, Bytes batch_bytes, std::int64_t size);
  Bytes resident_bytes() const;  // the most seen at any size
  Bytes resident_bytes(std::int64_t size) const;
  // With last_stage_is_callers: the caller's code after the stages held
  // `bytes` above what was live when it began, the caller's gradients then
  // alive among that (set_caller_gradient_bytes: resident for the step), at
  // input `size`, measured by a step. So an accumulating loop's first
  // micro-step (the head makes its gradient) and its later ones (the
  // head's new gradient beside the others) count the same bytes, and a
  // line between their sizes never falls below either; a loop that zeroes
  // them inside its loss counts less, and holds them only until it does.
  void observe_after_stages(std::int64_t size, Bytes bytes);
  // The same, by calibration's stand-in for the caller's code (a backward
  // from the model's output, not the caller's loss), which predicts only
  // above the sizes steps measured: `bytes` with the output let go before
  // that backward, and a loop that keeps it through its backward (most
  // do: `out = model(x); out.loss.backward()`) `output_bytes` more at every
  // moment from the output's making on, its peak among them.
  void observe_after_stages_stand_in(std::int64_t size, Bytes bytes, Bytes output_bytes);
  // Whether the caller's loop keeps the model's output through its
  // backward (the default): the stand-in counts the output's bytes.
  void set_output_held(bool held) { output_held_ = held; }
  bool output_held() const { return output_held_; }
  // The last step's output, which a loop that keeps it through its
  // backward keeps into this step too (`out = model(x)` replaces it only
  // once the call returns), is alive as this step begins, `bytes` of it:
  // resident already, so the stand-in does not count the output it holds
  // a second time (up to what it counts at the step's size). 0 between
  // steps of a loop that lets it go.
  void set_previous_output_bytes(Bytes bytes) { previous_output_bytes_ = std::max<Bytes>(0, bytes); }
  // The gradients of the caller's parameters outside the stages alive as
  // this step begins: resident while the stages run, and part of what the
  // caller's code after them holds (it may free them). observe_resident()
  // takes live bytes without them.
  void set_caller_gradient_bytes(Bytes bytes) { caller_gradients_ = bytes; }
  // Weights gathered around each stage's runs, outside what its operations
  // allocate (FSDP2's all-gathers, made by the stage's hooks before it runs
  // and freed after): stage i's forwards run with `forward[i]` bytes more
  // live, its backward with `backward[i]`. Every chain the planners see
  // counts them in the stages' temporaries.
  void set_gathered_bytes(std::vector<Bytes> forward, std::vector<Bytes> backward);
  // Whether a step has measured the caller's code at `size` or above.
  bool after_stages_covered(std::int64_t size) const { return after_stages_.covers(size); }
  // The caller's code between two steps (the backward before the first
  // stage, the optimizer's update, the next forward until the first stage)
  // reached `bytes` above the persistent bytes of the step after it: the
  // chain's update_temp_bytes are at least the most seen.
  void observe_between_steps(Bytes bytes) { between_steps_ = std::max(between_steps_, bytes); }
  Bytes between_steps() const { return between_steps_; }
  // With weights on the host: the host's update of `stage` took `seconds`
  // (the shortest seen is kept: interference only adds time).
  void observe_update_time(int stage, Seconds seconds);

  // The budget the next steps are planned for; each has its plan cache.
  void use_budget(Bytes planning_budget) { budget_ = planning_budget; }
  std::int64_t bucket_of(std::int64_t size) { return cache().bucket_of(size); }

  // The collection schedule of `round` (variants taken in turn), the
  // schedule with the least memory whatever the predictor says, the
  // planner's own schedule with the lowest predicted peak for `size`, and
  // that for the largest input (or the fallback where it needs less).
  int variant_rounds() const;
  Schedule collection_schedule(int round) const;
  Schedule fallback_schedule() const;
  Schedule most_frugal(std::int64_t size);
  Schedule most_frugal_at_largest();
  // The predicted peak at `size` of the least-memory schedule: no plan for
  // this size fits a budget below it. With Bound::Least, on the least the
  // caller's code after the stages held there: what a refusal may rest on.
  Bytes least_peak(std::int64_t size, predict::BytesEnvelope::Bound after = predict::BytesEnvelope::Bound::Most);

  // The schedule for a step of `size`, the `steps_before`-th this front end runs.
  StepChoice choose(std::int64_t size, long steps_before);
  // The step ran out of budget with `choice` (`why`): the next schedule to
  // try (kind Retry), the plan cache updated. A planned attempt that ran out
  // needed at least what was live plus what it asked for, which
  // observe_peak() learns from before the next plan is made. Throws Error
  // naming `where` and why when no schedule is left or the retries are spent.
  StepChoice retry(std::int64_t size, const StepChoice& choice, StepAttempts& attempts, const std::string& where,
                   const OutOfBudget& why);
  // The step ran out of budget with `choice` and will not be retried: the
  // next plan for its size is stricter.
  void mark_failed(std::int64_t size, const StepChoice& choice);
  // A finished step whose input (as planned: one micro-batch's) was `at`:
  // the predictor learns its sample (with the optimizer update's temporary
  // bytes), the link and the copy issue its copies.
  void learn(const Signature& at, const ExecutionResult& result, Bytes update_temp_bytes);
  // A planned step of `size` peaked at `measured_peak` (or had reached it
  // when it ran out of budget) where the predicted chain said
  // `predicted_peak`. Where it peaked higher, plans for new sizes from now on
  // take the activation memory as that much larger (the largest such factor
  // seen, at most kMaxShortfall): a size's first plan then fits where it
  // would have run out and been retried under a plan an eighth of the
  // activation budget stricter.
  void observe_peak(std::int64_t size, Bytes predicted_peak, Bytes measured_peak);
  double learned_shortfall() const { return shortfall_; }
  static constexpr double kMaxShortfall = 1.25;
  // `shortfall` grown by a peak of `measured` bytes where `predicted` were
  // planned, `fixed` of both persistent: at most kMaxShortfall, never less.
  static double grown_shortfall(double shortfall, Bytes fixed, Bytes predicted, Bytes measured);
  // Calibration's measurements: a sample for the predictor, a run's copy issue times.
  void observe_sample(const Signature& at, const predict::ChainSample& sample) {
    predictor_.observe(at.size, sample, at.shape);
  }
  void observe_copy_issue(const ExecutionResult& result);

  long cache_hits() const;
  long cache_misses() const;
  double to_host_bandwidth() const { return link_.device_to_host(); }
  double to_device_bandwidth() const { return link_.host_to_device(); }

 private:
  // The plan cache of the current budget; the bucket width is fixed by the first.
  predict::PlanCache& cache();
  Plan plan_for(std::int64_t size);
  // largest_chain() without copying a pinned chain: planning asks for it on every new plan.
  const Chain& largest_for_planning();

  StepPlannerOptions options_;
  const StagedModel& model_;
  WeightPlacement placement_;
  std::unique_ptr<plan::Planner> planner_;
  predict::ChainPredictor predictor_;
  predict::LinkEstimate link_;
  predict::CopyIssueEstimate copy_issue_;
  std::map<Bytes, std::unique_ptr<predict::PlanCache>> caches_;  // by planning budget
  std::int64_t bucket_width_ = 0;                                // 0: not fixed yet
  Bytes budget_ = 0;
  std::map<std::int64_t, Bytes> resident_;                   // the most seen, by size
  predict::BytesEnvelope after_stages_;                      // last_stage_is_callers: measured by steps
  predict::BytesEnvelope after_stages_stand_in_;             // ... by calibration's stand-in, the output let go
  predict::BytesEnvelope after_stages_output_held_;          // ... the output held through the backward
  bool output_held_ = true;                                  // set_output_held()
  Bytes previous_output_bytes_ = 0;                          // set_previous_output_bytes()
  Bytes between_steps_ = 0;                                  // observe_between_steps()' most
  Bytes caller_gradients_ = 0;                               // set_caller_gradient_bytes()
  std::vector<Bytes> gathered_forward_, gathered_backward_;  // set_gathered_bytes(); empty: none
  double shortfall_ = 1.0;                                   // observe_peak()'s factor, >= 1
  std::int64_t largest_size_ = 0;
  std::optional<Chain> pinned_largest_;
  Chain predicted_largest_;            // largest_for_planning()'s, when none is pinned
  std::vector<Seconds> update_times_;  // per stage; weights on the host
};

}  // namespace memtrain::runtime
