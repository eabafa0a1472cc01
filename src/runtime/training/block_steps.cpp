#include "runtime/training/block_steps.h"

#include <c10/util/Exception.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <optional>

#include "core/seconds_since.h"
#include "plan/schedule_builders.h"
#include "runtime/execution/chain_measurement.h"
#include "runtime/memory/counting_allocator.h"
#include "runtime/memory/tensor_bytes.h"
#include "runtime/step/step_attempts.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

namespace {

// Micro-steps, as a loop that accumulates gradients has several per
// update: each forward through the model is one.
std::string micro_step_label(long micro_step, long forward) {
  return "micro-step " + std::to_string(micro_step) + " (the model's forward number " + std::to_string(forward) +
         (forward != micro_step ? ", counting the micro-steps run again" : "") + ")";
}

// The chain's last stage is the caller's code after the blocks.
BlockStepsOptions with_callers_stage(BlockStepsOptions options) {
  options.steps.last_stage_is_callers = true;
  return options;
}

// One micro-batch a step, and no update of memtrain's to wait for.
WeightPlacement placement_of(const BlockStepsOptions& options) {
  return {options.weights_on_host, 1, /*updates_inline=*/true};
}

}  // namespace

BlockSteps::BlockSteps(StagedModel model, GradientBoundary* boundary, DeviceMemory& memory, BlockStepsOptions options,
                       std::vector<torch::Tensor> outer_parameters)
    : model_(std::move(model)), outer_parameters_(std::move(outer_parameters)), boundary_(boundary), memory_(memory),
      options_(with_callers_stage(std::move(options))),
      step_planner_(options_.steps, model_, stage_constants(model_, /*optimizer_slots=*/0), placement_of(options_)),
      budget_(options_.budget, "wrap the model with a sample (its largest input), or give the budget in bytes") {
  MEMTRAIN_ASSERT(model_.size() >= 2 && &model_.stage(model_.size() - 1) == boundary_,
                  "the gradient boundary follows at least one block");
  executor_ = std::make_unique<Executor>(model_, memory_);
  plan::check_weights_placement(options_.steps.planner, options_.weights_on_host, "weights='host'");
  if (options_.weights_on_host) {
    host_weights_ = std::make_unique<HostWeights>(model_, memory_);
    executor_->set_host_weights(host_weights_.get());
  }
  taken_.resize(model_.size());
  boundary_->set_exchange([this](const torch::Tensor& output) { return exchange(output); });
}

BlockSteps::~BlockSteps() {
  cancel();
  end_lease();
}

void BlockSteps::end_lease() {
  if (lease_held_) leased_->settle(lease_step_taken_);
  lease_held_ = lease_step_taken_ = false;
}

std::string BlockSteps::next_micro_step() const {
  return micro_step_label(steps_run_ + 1 - steps_run_again_, steps_run_ + 1);
}

Bytes BlockSteps::outer_gradient_bytes() const {
  Bytes bytes = 0;
  for (const torch::Tensor& p : outer_parameters_) {
    bytes += tensor_bytes(p.grad());
  }
  return bytes;
}

torch::Tensor BlockSteps::exchange(const torch::Tensor& output) {
  torch::Tensor dy = std::move(dy_);
  dy_ = torch::Tensor();
  return dy.defined() ? dy : torch::zeros_like(output);
}

StepContext BlockSteps::fresh_context() {
  StepContext ctx;
  // Blocks draw from LibTorch's default generator, which the executor
  // replays (with the context's) when it runs a block again.
  ctx.generator = default_generator_of(memory_.device());
  ctx.take_gradients = [this](int stage, StepContext::TakenGradients taken) { taken_.at(stage) = std::move(taken); };
  ctx.extra_output_gradients = [this](int stage) {
    return stage < static_cast<int>(extra_grads_.size()) ? extra_grads_[stage] : std::vector<torch::Tensor>{};
  };
  ctx.input_gradient_in_pieces = [this](int stage) { return stage == input_in_pieces_; };
  return ctx;
}

void BlockSteps::cancel() {
  abandon_running_step();
  stop_relief();
  for (auto& taken : taken_) taken = {};
  block_gradients_ = {};
  input_in_pieces_ = -1;
  extra_grads_.clear();
  again_ = false;
  execution_.reset();
  dy_ = kept_dy_ = last_dx_ = torch::Tensor();
  if (calibration_round_ < 0) batch_.input = torch::Tensor();  // as end_step() lets it go
  if (step_) step_->guard().release();
}

void BlockSteps::begin_step(const torch::Tensor& x) {
  if (!x.defined()) throw UsageError("block 0's input is undefined; expected a tensor");
  if (x.device() != memory_.device()) {
    throw UsageError("block 0's input is on " + x.device().str() + "; memtrain runs this model on " +
                     memory_.device().str());
  }
  const bool calibrating = calibration_round_ >= 0;
  if (!calibrating) budget_.step_bytes();  // throws for a share of a peak not measured yet
  cancel();                                // a step begun and never finished
  t0_ = std::chrono::steady_clock::now();
  synchronizations_at_start_ = memory_.synchronizations();
  batch_ = batch_of(x);
  const std::int64_t size = batch_.signature.size;
  between_steps_ = false;  // a backward whose end was not heard: its window held other work
  const Bytes outer_gradients = outer_gradient_bytes();
  step_planner_.set_caller_gradient_bytes(outer_gradients);
  const Bytes resident_now = memory_.live() - outer_gradients - gathered_first_;
  step_planner_.set_previous_output_bytes(calibrating || !output_held() ? 0 : previous_output_bytes_);
  previous_output_bytes_ = 0;
  if (calibrating) {
    calibration_live_ = std::max(calibration_live_, resident_now);
    StepChoice measured;
    measured.kind = PlanKind::Collect;
    measured.schedule = calibration_->schedule(measured_round(), model_.size());
    // A measurement: no budget, and nothing it does survives (end_step()).
    step_.emplace(step_planner_, PlannedStep::Start{size, steps_run_, "calibration"},
                  StepGuard(memory_, std::nullopt, false, default_generator_of(memory_.device()), &model_),
                  std::move(measured));
  } else {
    if (step_planner_.predictor().ready()) step_planner_.observe_resident(resident_now, batch_.bytes(), size);
    step_planner_.note_size(size);
    if (leased_) take_lease(size);
    step_planner_.use_budget(budget_.step_bytes());
    step_start_live_ = memory_.live();
    step_.emplace(
        step_planner_,
        PlannedStep::Start{size, steps_run_, next_micro_step() + ": input " + batch_.signature.describe()},
        StepGuard(memory_, budget_.step_bytes(), enforces_budget(), default_generator_of(memory_.device()), &model_));
    try {
      refuse_if_infeasible(size, step_->choice());  // before the step changes anything
    } catch (...) {
      step_.reset();
      batch_.input = torch::Tensor();  // the refused step holds nothing of the caller's
      throw;
    }
    current_ = StepRecord{};
    current_.step = ++steps_run_;
    current_.signature = batch_.signature;
    current_.budget_bytes = budget_.step_bytes();
    current_.lease_want_bytes = lease_.request.want;
    current_.lease_least_bytes = lease_.request.least;
    current_.lease_wait_seconds = lease_.waited;
  }
  ctx_ = fresh_context();
  executor_->keep_saved_movable(!calibrating && enforces_budget());
  MEMTRAIN_ASSERT(!gathers_ || step_->choice().schedule.recomputes_locally(),
                  "sharded blocks run again only around their own backward");
  replanning_.reset();
  execution_ = executor_->start(step_->choice().schedule, batch_, ctx_);
  ++step_id_;
  forwarded_ = -1;
}

void BlockSteps::take_lease(std::int64_t size) {
  end_lease();
  // A collection step asks for the collection schedule at the largest input.
  const bool collecting = steps_run_ < options_.steps.collect_steps || !step_planner_.predictor().ready();
  lease_ = leased_->acquire(step_planner_, size, collecting);
  lease_held_ = true;
  budget_.grant(lease_.budget);
}

Bytes BlockSteps::calibrated_for_lease(StepLease& lease) {
  MEMTRAIN_ASSERT(budget_.is_share() && budget_.resolved() && steps_run_ == 0,
                  "a job measures its share's reference before its first step");
  return LeasedSteps(lease).calibrated(step_planner_, largest_chain(), budget_.reference());
}

void BlockSteps::lease_from(StepLease& lease, Bytes group_budget) {
  MEMTRAIN_ASSERT(!leased_ && steps_run_ == 0, "a job leases its steps from the first");
  leased_ = std::make_unique<LeasedSteps>(lease);
  budget_.respecify(BudgetSpec{false, 0, group_budget});
}

void BlockSteps::refuse_if_infeasible(std::int64_t size, StepChoice& choice) {
  if (!planner().respects_budget() || !step_planner_.predictor().ready()) return;
  // Below the largest size measured, the prediction carries a margin the
  // largest's does not: a schedule that fits the largest fits a smaller input.
  const std::int64_t largest = step_planner_.predictor().largest_observed();
  const auto fits = [&](const Schedule& s) {
    return sim::simulate(step_planner_.predicted_chain(size), s).peak_bytes <= budget_.step_bytes() ||
           (size < largest &&
            sim::simulate(step_planner_.predicted_chain(largest), s).peak_bytes <= budget_.step_bytes());
  };
  if (fits(choice.schedule)) return;
  // A refusal rests on the least the caller's code after the blocks held
  // at this size, and below the largest size measured on the largest's least too.
  constexpr auto optimistic = predict::BytesEnvelope::Bound::Least;
  Bytes least = step_planner_.least_peak(size, optimistic);
  if (least > budget_.step_bytes() && size < largest)
    least = std::min(least, step_planner_.least_peak(largest, optimistic));
  // Predictions may overestimate: a step as large that ran shows what fits.
  const bool shown = std::any_of(needed_.lower_bound(size), needed_.end(), [&](const auto& seen) {
    return memory_.live() + seen.second <= budget_.step_bytes();
  });
  if (!shown && least > budget_.step_bytes() && budget_.is_share() && size <= reference_size_) {
    // N% is of the caller's own plain loop on inputs up to the sample's:
    // its step at this size keeps everything, with what the caller's code
    // showed it holds, and holds at least memtrain's least. Where that
    // passes the reference, the reference grows to it, and the budget with
    // it ("100%" runs every step the plain loop runs). A larger input than
    // the sample is not the loop N% was measured on: refused.
    const Bytes plain =
        plan::keep_everything_peak(step_planner_.completed(step_planner_.predictor().predict(size), size, optimistic));
    if (plain > budget_.reference()) {
      budget_.set_reference(plain);
      step_->guard().set_budget(budget_.step_bytes());
      current_.budget_bytes = budget_.step_bytes();
    }
  }
  if (least <= budget_.step_bytes() || shown) {
    // A collection schedule that does not fit: the least-memory one measures too.
    if (choice.kind == PlanKind::Collect) choice = {step_planner_.most_frugal(size), PlanKind::Frugal, 0};
    return;
  }
  const Bytes after =
      step_planner_.completed(step_planner_.predictor().predict(size), size, optimistic).stages.back().saved_bytes;
  // What the least is made of, so that a loop can tell which of its own
  // bytes to cut: what was resident as the step began (the optimizer's
  // state among it, where the loop's optimizer made it after the budget
  // was checked) and what its code after the blocks holds.
  std::string resident = format_bytes(memory_.live()) + " resident as it began (the weights, the gradients";
  if (optimizer_state_ > 0) resident += ", the optimizer's state of " + format_bytes(optimizer_state_);
  resident += " and the input)";
  const std::string late =
      optimizer_counted_late_ > 0
          ? "; the optimizer's state was counted at its first update, after the budget was checked: pass the "
            "optimizer to memtrain.Module(optimizer=) to have a budget that cannot hold it refused at once "
            "(transformers' Trainer: make it first, on the model's parameters, and give it to both, "
            "Trainer(optimizers=(optimizer, None)))"
          : "";
  const std::string larger =
      size > sample_signature_.size
          ? "; the input is larger than the sample's (" + sample_signature_.describe() +
                "), which the least was stated for: wrap the model with a sample as large as the loop's largest "
                "input"
          : "";
  throw Infeasible(next_micro_step() + ": input " + batch_.signature.describe() + " needs at least " +
                       format_bytes_beside(least, budget_.step_bytes()) + " with planner " + planner().name() +
                       "'s least-memory schedule, " + resident + " and " + format_bytes(after) +
                       " held by the code after the blocks (the head and the loss), above the budget " +
                       format_bytes_beside(budget_.step_bytes(), least) +
                       "; nothing of this step ran: give a budget of at least " +
                       format_bytes_beside(least, budget_.step_bytes()) + " or a smaller input" + larger + late,
                   least);
}

void BlockSteps::run_step_again() {
  // The step's forward again, with its calls, its random draws and its
  // buffers as at its start, under the least-memory schedule (the caller's
  // retained graph is alive through it): this backward reads what the first
  // one read, autograd adds the gradients to the first's, and the caller's
  // random stream is left where it is.
  const RngSnapshot now = RngSnapshot::capture(default_generator_of(memory_.device()));
  step_->guard().roll_back();
  step_->choice() = {step_planner_.most_frugal(batch_.signature.size), PlanKind::Retry, 0};
  ctx_ = fresh_context();
  step_->guard().set_budget(budget_.step_bytes());
  step_->guard().enforce_again();
  execution_ = executor_->start(step_->choice().schedule, batch_, ctx_);
  again_ = true;
  try {
    run_until_forward_of_later(blocks() - 1);
  } catch (...) {
    cancel();
    throw;
  }
  now.restore(default_generator_of(memory_.device()));
  forwarded_ = blocks() - 1;
}

void BlockSteps::end_of_backward() {
  if (!between_steps_) return;
  // From block 0's backward to the end of the caller's backward, the caller's
  // autograd ran (the embeddings' backward, its gradients accumulating): its
  // peak above what persists is what it needs on top of a step's persistent bytes.
  between_steps_ = false;
  // Nothing above what the step's last operation left: no more than the
  // step. (Its input went at its end: batch_.bytes() counts it where a
  // second backward gave it back.)
  if (memory_.peak() > end_live_)
    step_planner_.observe_between_steps(memory_.peak() - (memory_.live() - batch_.bytes()));
}

void BlockSteps::abandon_running_step() {
  if (!in_callers_code_) return;
  in_callers_code_ = false;
  if (calibration_round_ >= 0 || !execution_) return;
  // The caller's code after the blocks stopped (out of budget, or it
  // dropped the output): it needed at least what it reached, or asked for.
  const Bytes reached = at_elastic_least(std::max(memory_.peak(), memory_.refused()));
  learn_callers_need(batch_.signature.size, reached - caller_live_ + spilled_);
  step_planner_.mark_failed(batch_.signature.size, step_->choice());
}

torch::Tensor BlockSteps::forward(int block, const torch::Tensor& input) {
  // Counted whichever thread calls: the step's tensors are made here.
  const auto counted = memory_.activate();
  if (block < 0 || block >= blocks()) {
    throw UsageError("block " + std::to_string(block) + " does not exist; the model has blocks 0.." +
                     std::to_string(blocks() - 1));
  }
  if (block == 0) {
    begin_step(input);
  } else if (!execution_ || forwarded_ != block - 1) {
    throw UsageError("block " + std::to_string(block) + " was called " +
                     (execution_ && forwarded_ >= block ? "again in one forward"
                                                        : "before block " + std::to_string(block - 1) +
                                                              " (the forward skipped it, as LayerDrop skips layers)") +
                     "; memtrain plans blocks that the model's forward calls once each, in order");
  }
  try {
    run_forward_to(block);
  } catch (...) {
    cancel();  // a step that cannot go on: nothing of it stays, the budget's enforcement neither
    throw;
  }
  forwarded_ = block;
  torch::Tensor output = execution_->output_of(block);
  MEMTRAIN_ASSERT(output.defined(), "a block's forward leaves its output");
  if (block == blocks() - 1) {
    // From here to the backward, the caller's code (head, loss) runs: its
    // memory is the boundary's forward.
    caller_live_ = memory_.live();
    caller_gradients_ = outer_gradient_bytes();
    memory_.reset_peak();
    in_callers_code_ = true;
    elastic_least_ = -1;
    start_relief();
  }
  return output;
}

void BlockSteps::begin_elastic(Bytes least) {
  if (!in_callers_code_) return;
  // What the code reached before, or the elastic part at its least.
  elastic_least_ = std::max({elastic_least_, memory_.peak(), memory_.live() + std::max<Bytes>(0, least)});
}

Bytes BlockSteps::at_elastic_least(Bytes reached) const {
  // An elastic part (a chunked loss that took larger chunks, or the whole
  // logits, because they were free) fits with its least.
  return elastic_least_ >= 0 ? std::min(reached, elastic_least_) : reached;
}

void BlockSteps::start_relief() {
  spilled_ = 0;
  if (calibration_round_ >= 0 || !enforces_budget()) return;
  relief_thread_ = std::this_thread::get_id();
  relieving_ = memory_.relieve_with(&relief_);
}

void BlockSteps::stop_relief() {
  if (!relieving_) return;
  memory_.relieve_with(nullptr);
  relieving_ = false;
}

Bytes BlockSteps::SpillRelief::relieve(Bytes bytes) {
  BlockSteps& s = owner_;
  // Only the caller's code after the blocks, on its own thread: anywhere
  // else the step's kept activations are the schedule's to hold.
  if (!s.in_callers_code_ || !s.execution_ || std::this_thread::get_id() != s.relief_thread_) return 0;
  Bytes freed = 0;
  try {
    freed = s.execution_->spill(bytes);
  } catch (const std::exception&) {
    // nothing more could move
  }
  s.spilled_ += freed;
  if (freed > 0 || !s.budget_.is_share()) return freed;
  // N% is of the caller's own plain loop, which holds at least what this
  // step holds with the allocation (memtrain keeps no more than it would):
  // the reference grows to that, and the budget with it, from this
  // allocation on. `bytes` is what the allocation passes the budget by.
  const Bytes required = s.memory_.budget() + bytes;
  if (s.budget_.reference() >= required) return 0;
  const Bytes before = s.budget_.step_bytes();
  s.budget_.set_reference(required);
  const Bytes after = s.budget_.step_bytes();
  if (after <= before) return 0;
  s.step_->guard().set_budget(after);
  s.current_.budget_bytes = after;
  return after - before;
}

void BlockSteps::SpillRelief::refuse(const OutOfBudget& why) {
  BlockSteps& s = owner_;
  if (!s.in_callers_code_ || std::this_thread::get_id() != s.relief_thread_) return;
  // What the allocation would have made live, with the step's kept
  // activations off the device already: a budget below it cannot run this loop.
  const Bytes least = why.live() + why.request();
  TORCH_CHECK_WITH(OutOfMemoryError, false,
                   "memtrain: step " + std::to_string(s.current_.step) + " (input " + s.batch_.signature.describe() +
                       ") ran out of its budget in the code after the blocks (the head, the loss and their "
                       "backward): " +
                       why.what() + ", with " + format_bytes(s.spilled_) +
                       " of the step's activations moved to host memory already. This loop needs more than " +
                       format_bytes(least) +
                       " at this input; memtrain has learnt it, and the next step of this size is planned "
                       "with it or refused before it runs (memtrain.Infeasible, naming the least budget). "
                       "Give a budget of at least that, or a smaller input. The step is abandoned: zero the "
                       "gradients (the blocks' have nothing of it; those of the head may) and run it again");
}

void BlockSteps::learn_callers_need(std::int64_t size, Bytes above) {
  step_planner_.observe_after_stages(size, above);
  // The plain loop's step holds every gradient beside it.
  const Bytes need = above + caller_gradients_;
  // What the caller's code holds grows with the tokens (a language model's
  // logits): scaled to the reference's size, from steps at least half as
  // large (a few tokens' fixed bytes, scaled up, would say nothing of it).
  if (!budget_.is_share() || reference_size_ <= 0 || size <= 0 || 2 * size < reference_size_) return;
  const double ratio = std::max(1.0, static_cast<double>(reference_size_) / static_cast<double>(size));
  const auto scaled = static_cast<Bytes>(static_cast<double>(need) * ratio);
  if (scaled <= reference_callers_need_) return;
  budget_.set_reference(budget_.reference() + scaled - reference_callers_need_);
  reference_callers_need_ = scaled;
}

void BlockSteps::run_until_forward_of_later(int block) {
  while (!execution_->done()) {
    const Op& op = execution_->next();
    if (is_forward(op.kind) && op.stage > block) return;
    execution_->step();
  }
  MEMTRAIN_ASSERT(false, "a schedule runs the boundary's forward after the blocks'");
}

void BlockSteps::run_forward_to(int block) {
  run_attempts([&] { run_until_forward_of_later(block); }, [&](const OutOfBudget& why) { restart_schedule(why); });
  if (gathers_ && !again_ && calibration_round_ < 0 && planner().respects_budget()) replan_rest_if_over(block);
}

void BlockSteps::replan_rest_if_over(int block) {
  const std::vector<OpRecord>& ran = execution_->result().ops;
  Schedule& schedule = step_->choice().schedule;
  if (ran.empty() || !schedule.recomputes_locally()) return;
  // The step's prediction, made at its first block and again when it changes.
  if (!replanning_ || replanning_->schedule != schedule) {
    Chain chain = step_planner_.predicted_chain(batch_.signature.size);
    sim::SimResult planned = sim::simulate(chain, schedule, /*per_op=*/true);
    replanning_ = Replanning{std::move(chain), schedule, std::move(planned)};
  }
  const Chain& chain = replanning_->chain;
  const sim::SimResult& planned = replanning_->planned;
  // How many times their prediction the blocks' forwards so far rose (to
  // their peak) and kept: a block's memory may depend on its data, not only
  // on its input's size (a mixture of experts' routing).
  double outgrown = 1;
  Bytes before = chain.persistent_bytes() + chain.stages.front().input_bytes;
  const auto ratio = [](Bytes seen, Bytes expected) {
    return expected > 0 ? static_cast<double>(seen) / static_cast<double>(expected) : 1.0;
  };
  for (size_t k = 0; k < ran.size(); ++k) {
    const sim::OpCost& predicted = planned.ops.at(k);
    const OpRecord& measured = ran[k];
    if (is_forward(measured.op.kind) && measured.op.stage < blocks()) {
      outgrown = std::max({outgrown, ratio(measured.peak - measured.live_before, predicted.peak_bytes - before),
                           ratio(measured.live_after - measured.live_before, predicted.after_bytes - before)});
    }
    before = predicted.after_bytes;
  }
  // The memory held now, and the rest's predicted rise above it, grown as much.
  const Bytes now = memory_.live();
  const auto reaches = [&](const sim::SimResult& sim) {
    Bytes rest = 0;
    for (size_t k = ran.size(); k < sim.ops.size(); ++k) rest = std::max(rest, sim.ops[k].peak_bytes);
    const Bytes rise = std::max<Bytes>(0, rest - sim.ops.at(ran.size() - 1).after_bytes);
    return now + static_cast<Bytes>(outgrown * static_cast<double>(rise));
  };
  if (reaches(planned) <= budget_.step_bytes()) return;
  Schedule rest = schedule;
  for (int j = block + 1; j < blocks(); ++j) {
    // Block j has not run yet: its first forward is its only one when it is kept.
    const auto first = std::find_if(rest.ops.begin(), rest.ops.end(),
                                    [&](const Op& op) { return is_forward(op.kind) && op.stage == j; });
    if (first == rest.ops.end() || first->kind != OpKind::ForwardAll) continue;
    rest = plan::recomputing_stage(rest, j);
    if (reaches(sim::simulate(chain, rest, /*per_op=*/true)) <= budget_.step_bytes()) break;
  }
  if (rest == schedule) return;
  execution_->continue_with(rest);
  schedule = std::move(rest);
  ++current_.replans;
  replanning_.reset();
}

void BlockSteps::restart_schedule(const OutOfBudget& why) {
  MEMTRAIN_ASSERT(calibration_round_ < 0, "calibration runs with the budget not enforced");
  // Nothing of the attempt reached the gradients: roll back and run again.
  execution_->settle();
  for (const OpRecord& rec : execution_->result().ops) current_.blocks_seconds += rec.seconds;
  execution_.reset();
  step_->retry(why);
  current_.retries = step_->retries();
  ctx_ = fresh_context();
  execution_ = executor_->start(step_->choice().schedule, batch_, ctx_);
}

void BlockSteps::fold_caller_memory() {
  ExecutionResult& result = execution_->result();
  MEMTRAIN_ASSERT(!result.ops.empty() && result.ops.back().op.kind == OpKind::ForwardAll,
                  "the boundary's forward was measured");
  OpRecord& rec = result.ops.back();
  const Bytes caller_peak = std::max(caller_live_, caller_peak_);
  rec.live_before = caller_live_;
  rec.live_after = caller_peak;
  rec.peak = std::max(rec.peak, caller_peak);
  result.peak = std::max(result.peak, rec.peak);
}

torch::Tensor BlockSteps::backward(long step, int block, const torch::Tensor& dy,
                                   std::vector<torch::Tensor> extra_grads, bool input_in_pieces) {
  const auto counted = memory_.activate();
  input_in_pieces_ = input_in_pieces ? block : -1;
  extra_grads_.resize(model_.size());
  extra_grads_.at(block) = std::move(extra_grads);
  if (step != step_id_) {
    throw UsageError("block " + std::to_string(block) +
                     "'s backward belongs to a step a later forward replaced; memtrain runs one step at a time: "
                     "call backward before the next forward");
  }
  if (runs_again(step, block)) {
    if (!batch_.input.defined()) {
      throw UsageError("a second backward reached block " + std::to_string(block) +
                       " of a step that ended without its input given back (resume_input()); a retained graph "
                       "gives it");
    }
    run_step_again();
  }
  if (!execution_) {
    throw UsageError("block " + std::to_string(block) +
                     "'s step was abandoned (its output was dropped, or the code after the blocks ran out of "
                     "budget); run the forward again");
  }
  if (forwarded_ != blocks() - 1) {
    throw UsageError("the forward called blocks 0.." + std::to_string(forwarded_) + " of " + std::to_string(blocks()) +
                     " and then the backward began; memtrain plans a forward that calls every block once, in order "
                     "(an early exit or a dropped layer is not supported: pass blocks= the ones every forward calls)");
  }
  if (block == blocks() - 1 && again_) {
    dy_ = dy;
    can_replay_ = false;  // it runs the least-memory plan already: none is stricter
  } else if (block == blocks() - 1) {
    stop_relief();
    caller_peak_ = memory_.peak();
    in_callers_code_ = false;
    // What the caller's code needed above what was alive as it began: what
    // it reached (its elastic part at its least), and the room spilling made.
    const Bytes above = at_elastic_least(caller_peak_) - caller_live_ + spilled_;
    if (calibration_round_ < 0) {
      learn_callers_need(batch_.signature.size, above);
    } else {
      step_planner_.observe_after_stages_stand_in(batch_.signature.size, above, calibration_output_bytes_);
      const Bytes held = output_held() ? calibration_output_bytes_ : 0;
      calibration_held_peak_ = caller_peak_ + held;
      if (reference_round()) {
        reference_callers_need_ = std::max(reference_callers_need_, above + held + caller_gradients_);
        reference_size_ = batch_.signature.size;
      }
    }
    current_.spilled_bytes = spilled_;
    dy_ = dy;
    after_caller_ = RngSnapshot::capture(ctx_.generator);
    // Nothing of the backward has run yet, and the parameters' gradients
    // go to the caller's autograd as each block's backward ends: the
    // backward can run again from here.
    can_replay_ = true;
    if (dy.defined()) {
      PoolScope host(&memory_.host());
      kept_dy_ = dy.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
    }
  } else {
    // A replay gives block i the gradient block i + 1's backward made: the
    // same as autograd's only when nothing else used block i's output.
    can_replay_ = can_replay_ && dy.is_same(last_dx_);
    execution_->set_gradient(dy.defined() ? dy : torch::zeros_like(execution_->output_of(block)));
  }
  try {
    backward_to(block);
  } catch (...) {
    cancel();  // as in forward()
    throw;
  }
  input_in_pieces_ = -1;
  torch::Tensor dx = execution_->gradient();
  last_dx_ = dx;
  block_gradients_ = std::move(taken_.at(block));
  for (auto& taken : taken_) taken = {};  // a replay's, of the blocks after: autograd has them
  if (block > 0 && !model_.stage(block).input_needs_gradient()) {
    // Nothing before this block trains (frozen embeddings and blocks):
    // autograd reaches no backward of theirs, which run here, empty.
    try {
      for (int below = block - 1; below >= 0; --below) {
        execution_->set_gradient(torch::Tensor());
        run_backward_to(below);
      }
    } catch (...) {
      cancel();
      throw;
    }
    end_step();
  } else if (block == 0) {
    end_step();
  }
  return dx;
}

void BlockSteps::run_backward_to(int block) {
  while (true) {
    MEMTRAIN_ASSERT(!execution_->done(), "block " + std::to_string(block) + "'s backward is in the schedule");
    const Op op = execution_->next();
    if (op.kind == OpKind::Backward && op.stage < block) {
      throw Error("block " + std::to_string(block) +
                  "'s backward was reached after a block before it; memtrain plans blocks whose outputs feed the "
                  "next block");
    }
    execution_->step();
    if (op.kind == OpKind::ForwardAll && op.stage == blocks()) fold_caller_memory();
    if (op.kind == OpKind::Backward && op.stage == block) return;
  }
}

void BlockSteps::backward_to(int block) {
  std::optional<OutOfBudget> last;
  run_attempts(
      [&] {
        if (last) {
          // The step again under a stricter plan, with the same random
          // draws and the caller's gradient.
          restart_schedule(*last);
          run_until_forward_of_later(blocks() - 1);
          after_caller_->restore(ctx_.generator);
          dy_ = kept_dy_.to(memory_.device(), /*non_blocking=*/false, /*copy=*/true);
        }
        run_backward_to(block);
      },
      [&](const OutOfBudget& why) {
        if (!can_replay_ || !kept_dy_.defined()) {
          step_planner_.mark_failed(batch_.signature.size, step_->choice());
          cancel();
          throw Error(std::string(why.what()) + ", in the planned backward of input " + batch_.signature.describe() +
                      ": the parameters' gradients are partial; zero them and run the step again (the next plan for "
                      "this size is stricter)");
        }
        last = why;
      });
}

void BlockSteps::resume_input(long step, const torch::Tensor& x) {
  if (step != finished_step_id_ || step != step_id_) {
    throw UsageError("the input given back belongs to step " + std::to_string(step) + "; the step that ended last is " +
                     std::to_string(finished_step_id_));
  }
  Batch again = batch_of(x);
  if (again.signature.shape != batch_.signature.shape) {
    throw UsageError("the input given back is " + again.signature.describe() + "; step " + std::to_string(step) +
                     " ran on " + batch_.signature.describe());
  }
  batch_ = std::move(again);
}

void BlockSteps::end_step() {
  ExecutionResult result = execution_->finish();
  execution_.reset();
  finished_step_id_ = step_id_;
  kept_dy_ = last_dx_ = torch::Tensor();
  extra_grads_.clear();
  step_->guard().release();
  const std::int64_t size = batch_.signature.size;
  // The step's input goes with the step: held here, it would sit beside
  // the next micro-step's embeddings, where the plain loop holds one. A
  // second backward (a retained graph) gives it back (resume_input()).
  if (calibration_round_ < 0) batch_.input = torch::Tensor();
  memory_.reset_peak();
  end_live_ = memory_.live();
  between_steps_ = !again_;
  if (again_) {  // a second backward of the step: learnt and reported once, by the first
    again_ = false;
    return;
  }
  if (calibration_round_ >= 0) {
    if (reference_round()) {
      // The plain loop's: its output held through the backward where the
      // loop keeps it. The optimizer's state joins it at end_calibration().
      calibration_->observe_reference(std::max(result.peak, calibration_held_peak_));
    }
    predict::ChainSample sample = sample_execution(result, model_.size(), 0);
    if (callers_round()) {
      calibration_->widen_first(sample);
    } else if (!reference_round()) {
      calibration_->observe_collection(calibration_round_, std::move(sample));
    }
    // A measurement, not a step: nothing it did survives (its gradients
    // stay for the next round's to add to, as a step's would).
    calibration_rollback_->restore_draws_and_buffers();
    return;
  }
  const Bytes needed = result.peak - step_start_live_;
  const auto [at, first] = needed_.try_emplace(size, needed);
  if (!first) at->second = std::min(at->second, needed);
  const StepChoice& choice = step_->choice();
  current_.plan = choice.kind;
  current_.schedule = choice.schedule;
  current_.peak_bytes = result.peak;
  current_.predicted_peak_bytes = step_->finish(batch_.signature, result, result.peak, 0);
  lease_step_taken_ = leased_ != nullptr;
  current_.seconds = seconds_since(t0_);
  current_.synchronizations = memory_.synchronizations() - synchronizations_at_start_;
  current_.planning_seconds = choice.planning_seconds;
  for (const OpRecord& rec : result.ops) current_.blocks_seconds += rec.seconds;
  last_ = current_;
}

void BlockSteps::set_budget(const BudgetSpec& budget) {
  if (leased_) throw UsageError("a job of a group takes each step's budget from the group's lease; set the group's");
  budget_.respecify(budget);
}

void BlockSteps::set_gathered_bytes(const std::vector<Bytes>& gathered, bool forward_prefetch) {
  if (host_weights_) {
    throw UsageError(
        "blocks sharded by FSDP2 keep their own shards; weights='host' moves whole weights, and "
        "the two do not combine: shard the model or keep its blocks' weights in host memory");
  }
  const int n = blocks();
  if (static_cast<int>(gathered.size()) != n) {
    throw UsageError("gathered bytes for " + std::to_string(gathered.size()) + " blocks; the model has " +
                     std::to_string(n));
  }
  std::vector<Bytes> forward(n + 1, 0), backward(n + 1, 0);  // the caller's stage gathers nothing here
  for (int i = 0; i < n; ++i) {
    // A gather holds the block's weights twice while it copies them out of
    // the collective's buffer; a backward holds its weights, its gradients
    // and the reduce-scatter's copy of them, or the block before's gather.
    const Bytes next = forward_prefetch && i + 1 < n ? gathered[i + 1] : 0;
    forward[i] = 2 * gathered[i] + 2 * next;
    backward[i] = 2 * gathered[i] + (i > 0 ? 2 * gathered[i - 1] : 0);
  }
  step_planner_.set_gathered_bytes(std::move(forward), std::move(backward));
  gathered_first_ = gathered.empty() ? 0 : gathered[0];
  gathers_ = std::any_of(gathered.begin(), gathered.end(), [](Bytes b) { return b > 0; });
}

int BlockSteps::begin_calibration() {
  MEMTRAIN_ASSERT(steps_run_ == 0 && !execution_, "calibration runs before any step");
  step_.reset();
  calibration_rollback_.emplace(default_generator_of(memory_.device()), &model_, memory_);
  calibration_rollback_->keep_gradients(model_.parameters());
  // Measured as a step of training is, with every gradient allocated (the
  // memory model keeps them resident), whatever the caller has now: in
  // host memory beside weights that live there.
  std::optional<PoolScope> in_host;
  if (host_weights_) in_host.emplace(&memory_.host());
  for (torch::Tensor& p : model_.parameters()) {
    if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  }
  in_host.reset();
  calibration_live_ = 0;
  reference_callers_need_ = 0;
  calibration_.emplace(step_planner_, measures_reference());
  return calibration_->rounds();
}

void BlockSteps::calibration_round(int round) {
  calibration_round_ = round;
  calibration_output_bytes_ = calibration_held_peak_ = 0;
}

void BlockSteps::observe_optimizer(Bytes state_bytes, Bytes update_temp_bytes, Bytes host_state_bytes) {
  MEMTRAIN_ASSERT(calibration_round_ >= 0 || calibration_rollback_, "an optimizer is measured during calibration");
  optimizer_state_ = std::max<Bytes>(0, state_bytes);
  host_optimizer_state_ = std::max<Bytes>(0, host_state_bytes);
  step_planner_.observe_between_steps(std::max<Bytes>(0, update_temp_bytes));
}

void BlockSteps::count_optimizer(Bytes state_bytes, Bytes update_temp_bytes, Bytes host_state_bytes) {
  state_bytes = std::max<Bytes>(0, state_bytes);
  host_state_bytes = std::max<Bytes>(0, host_state_bytes);
  optimizer_state_ += state_bytes;
  optimizer_counted_late_ += state_bytes;
  host_optimizer_state_ += host_state_bytes;
  step_planner_.observe_between_steps(std::max<Bytes>(0, update_temp_bytes));
  if (budget_.is_share() && budget_.reference() > 0) {
    budget_.set_reference(budget_.reference() + state_bytes + host_state_bytes);
  }
}

void BlockSteps::admit_optimizer(Bytes state_bytes, Bytes update_temp_bytes) {
  if (state_bytes <= 0 || !enforces_budget()) return;
  // N% grows with the state, as count_optimizer() grows it.
  StepBudget budget = budget_;
  if (budget.is_share() && budget.reference() > 0) budget.set_reference(budget.reference() + state_bytes);
  // The update itself: what is live (the weights, the gradients), the
  // state it makes and what it needs above them. The steps after it are
  // checked as each begins (a head that can run in chunks may turn to
  // them there).
  const Bytes update = memory_.live() + state_bytes + std::max<Bytes>(0, update_temp_bytes);
  if (update <= budget.step_bytes()) return;
  Bytes least = update;
  if (planner().respects_budget() && step_planner_.predictor().ready()) {
    const std::int64_t largest = step_planner_.predictor().largest_observed();
    least = std::max(least, step_planner_.least_peak(largest, predict::BytesEnvelope::Bound::Least) + state_bytes);
  }
  throw Infeasible(
      "the first update of an optimizer memtrain.Module was not given (one a framework made, as "
      "transformers' Trainer makes its own) would make " +
          format_bytes(state_bytes) + " of state, and need " + format_bytes(std::max<Bytes>(0, update_temp_bytes)) +
          " above it while it runs, beside the " + format_bytes(memory_.live()) +
          " live (the weights and the gradients): " + format_bytes_beside(update, budget.step_bytes()) +
          " in all, above the budget " + format_bytes_beside(budget.step_bytes(), update) +
          "; the update did not run: the weights, the gradients and the optimizer are as they were. "
          "Training with that state needs a budget of at least " +
          format_bytes_beside(least, budget.step_bytes()) +
          "; pass the optimizer to memtrain.Module(optimizer=) to have it checked at once "
          "(transformers' Trainer: make it on the model's parameters and give it to both, "
          "Trainer(optimizers=(optimizer, None)))",
      least);
}

BlockSteps::ShareReference BlockSteps::share_reference() const {
  ShareReference carried;
  carried.between_steps = step_planner_.between_steps();
  if (!budget_.is_share()) return carried;
  carried.reference = budget_.reference();
  carried.optimizer_state = optimizer_state_;
  carried.optimizer_counted_late = optimizer_counted_late_;
  carried.host_optimizer_state = host_optimizer_state_;
  carried.callers_need = reference_callers_need_;
  carried.size = reference_size_;
  return carried;
}

Bytes BlockSteps::simulated_reference() const {
  // The chain's resident holds the device's part of the optimizer's state already.
  return plan::keep_everything_peak(largest_chain()) + host_optimizer_state_;
}

void BlockSteps::end_calibration() {
  const bool called = batch_.input.defined();
  sample_signature_ = batch_.signature;
  const Bytes input_bytes = batch_.bytes();  // before cancel() lets the input go
  calibration_round_ = -1;
  cancel();
  calibration_rollback_->roll_back();
  calibration_rollback_.reset();
  if (!called) throw UsageError("the sample never called the model's blocks");
  const Calibration calibration = std::move(*calibration_);
  calibration_.reset();
  calibration.teach(step_planner_, batch_.signature);
  step_planner_.observe_between_steps(carried_.between_steps);
  // What stays resident, before the least is taken for "N%": the chain
  // the reference is planned on is the one the budget is checked on.
  // With room for what a loop holds beside it, so that a budget at the least stated trains.
  const Bytes resident = calibration_live_ + optimizer_state_;
  step_planner_.observe_resident(resident + loops_own_bytes(resident), input_bytes, batch_.signature.size);
  step_planner_.note_size(batch_.signature.size);
  reference_callers_need_ = std::max(reference_callers_need_, carried_.callers_need);
  reference_size_ = std::max(reference_size_, carried_.size);
  // N% is of the plain step with everything a budget counts: every
  // gradient (allocated for the measurement) and the optimizer's state; or
  // of the least the planner needs, where that is more, so that "100%"
  // always trains. With the weights in host memory that step is not run:
  // it is simulated, every weight on the device.
  if (budget_.is_share()) {
    // Sharded blocks: of the step without the optimizer's state, as before
    // it counted; their steps are not retried, and the FSDP2 predictions
    // missed by 4% at 70% of the step with Adam's state (test_fsdp).
    Bytes reference =
        host_weights_ ? simulated_reference() : calibration.reference_peak() + (gathers_ ? 0 : optimizer_state_);
    // The plain loop's step, measured before the head was chunked, holds more.
    reference = std::max(reference, carried_.reference);
    if (planner().respects_budget()) {
      const Chain largest = largest_chain();
      for (int tries = 0; tries < 4; ++tries) {  // a planner's least may move with the budget asked
        const Plan p = step_planner_.planner().plan({largest, reference, &largest});
        if (p.feasible) break;
        reference = std::max(reference + 1, p.min_budget_bytes);
      }
    }
    budget_.set_reference(reference);
  }
  // A state counted late is resident already (in calibration_live_, and in
  // the carried reference); it stays counted, for refusals that name it.
  optimizer_state_ = std::max(optimizer_state_, carried_.optimizer_state);
  optimizer_counted_late_ = std::max(optimizer_counted_late_, carried_.optimizer_counted_late);
  host_optimizer_state_ = std::max(host_optimizer_state_, carried_.host_optimizer_state);
  refuse_below_least(step_planner_, largest_chain(), budget_.step_bytes(), batch_.signature);
}

}  // namespace memtrain::runtime
