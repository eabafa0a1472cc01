// The blocks of any model, trained under a budget: the user's forward runs
// as written and calls its repeated blocks (an nn.Sequential calls its
// stages); the blocks are the chain's stages, planned per input size by the
// one StepPlanner, as the Trainer plans its steps. Nothing runs on
// another thread: the step's schedule runs an operation at a time
// (ScheduleExecution) on the caller's thread, as the forward calls
// each block and as autograd's backward reaches each one.
//
// - forward(0, x) begins a step on x (block 0's input): a cached plan for
//   its size or a new one, or a collection schedule while the predictor
//   learns. forward(i, ...) runs the schedule until the next operation is
//   the first forward of a later block, and returns block i's output. Before
//   the loss every stage runs forward once, in order, so block i's
//   operations are exactly those up to block i + 1's forward.
// - What the caller runs after the last block (the head, the loss, and
//   their backward) is the chain's last stage, the GradientBoundary: its
//   forward runs when the gradient of the last block's output arrives, and
//   its measured memory is what the caller's code reached in between.
//   The step planner learns it per size from the steps alone
//   (StepPlannerOptions::last_stage_is_callers): a size larger than every
//   one it was measured at runs the least-memory schedule.
// - backward(i, dy) gives the schedule the gradient of block i's output (as
//   autograd summed it) and runs it to block i's backward; it returns the
//   gradient of block i's input, and block_gradients() those of the leaves
//   block i's graph reached (its parameters, and any other: a parameter its
//   parent owns): they are the caller's autograd's to accumulate or return
//   (torch.autograd.grad), nothing is written to .grad here. Block 0's
//   backward ends the step, and the step planner learns from what the step
//   measured.
// - The whole step is what the budget bounds: what the caller keeps before
//   block 0 and between steps (an optimizer's state, gradients accumulated
//   between updates) is measured when a step begins, and what the caller's
//   code between steps reaches (the embeddings' backward, the optimizer's
//   update) is the chain's update_temp_bytes.
//
// A step whose least-memory schedule is predicted not to fit is refused
// (Infeasible, naming the least budget) when block 0 is called, before it
// runs anything or draws a random number. Out of budget before the last
// block has returned, the step is rolled back (buffers and generators as
// the step found them) and run again to the block the caller is in, under a
// stricter plan, losing nothing. With blocks sharded by FSDP2 nothing runs
// again (a rank alone cannot gather weights): a step whose blocks outgrow
// their prediction re-plans its blocks still to come after each block's
// forward. In the caller's code after the blocks, the activations the step
// keeps for its backward move to host memory as the caller's allocations
// need room, and come back block by block as the backward reaches them
// (Note [spilling] in executor.cpp): the caller's code never meets the
// budget while memtrain holds anything it could free. What that code
// needed, the bytes spilled included, is learned for that size, so the next
// plan leaves it the room. Only an allocation that cannot fit with nothing
// of memtrain's left is refused there; the step is then abandoned when its
// output goes. Out of budget during the backward, the step is run again from its
// start to the backward autograd is in, with the caller's gradient kept in
// host memory and the same random draws (the gradients the blocks after it
// gave autograd already are made again and dropped), when that is exact:
// each block's output fed only the next block. Otherwise the step throws,
// and the next plan for its size is stricter.
//
// A second backward of a step that ended (backward(retain_graph=True)
// before, two losses of one forward) runs the step's forward again, with
// its calls, random draws and buffers as at its start; autograd adds its
// gradients to the first backward's, as on the plain model.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/chain.h"
#include "core/error.h"
#include "core/signature.h"
#include "core/units.h"
#include "plan/planner.h"
#include "runtime/execution/executor.h"
#include "runtime/execution/host_weights.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/staged_model.h"
#include "runtime/step/calibration.h"
#include "runtime/step/leased_steps.h"
#include "runtime/step/planned_step.h"
#include "runtime/step/step_budget.h"
#include "runtime/step/step_input.h"
#include "runtime/step/step_planner.h"
#include "runtime/step/step_record.h"
#include "runtime/step/step_rollback.h"
#include "runtime/training/gradient_boundary.h"
#include "sim/simulator.h"

namespace memtrain::runtime {

struct BlockStepsOptions {
  // Mimose's loop, as the Trainer runs it. Its bucket width 0: 1/64 of the
  // largest size seen when the predictor first could plan.
  StepPlannerOptions steps;
  BudgetSpec budget = {false, 0, 0};
  // The blocks' weights live in host memory (HostWeights, the caller's
  // updates): each block's come to the device for its forward and its
  // backward, as the schedule fetches them, and its gradients go back to
  // host memory as the backward makes them; a planner of weights in host
  // memory ("swap") plans the steps. A budget in bytes: N% would be of a
  // plain step with every weight on the device, which is what does not fit.
  bool weights_on_host = false;
};

// What a loop holds beside the step that a sample's step did not (its last
// loss, the optimizer's step counters, small tensors of its own): the room
// the least budget stated leaves for it above `bytes` resident, and what an
// elastic part (a chunked loss) leaves free of a budget of `bytes`.
inline Bytes loops_own_bytes(Bytes bytes) { return std::max<Bytes>(64 * 1024, bytes / 1024); }

class BlockSteps {
 public:
  // `model`: the blocks, then `boundary`. `memory` outlives this.
  // `outer_parameters`: the model's trainable parameters outside the blocks
  // (embeddings, the head), whose gradients the caller's code makes and frees.
  BlockSteps(StagedModel model, GradientBoundary* boundary, DeviceMemory& memory, BlockStepsOptions options,
             std::vector<torch::Tensor> outer_parameters = {});
  ~BlockSteps();
  BlockSteps(const BlockSteps&) = delete;
  BlockSteps& operator=(const BlockSteps&) = delete;

  int blocks() const { return model_.size() - 1; }

  // Block `block` was called in the caller's forward. Block 0 begins a step
  // on `input` (abandoning one begun and never finished); a later block
  // continues the step, whose own output of the block before is its input.
  torch::Tensor forward(int block, const torch::Tensor& input);
  // The gradient of block `block`'s output in step `step` reached it;
  // returns the gradient of the block's input (undefined when none is needed).
  // `extra_grads`: the gradients of the block's other results
  // (StageModule::extra_outputs(); undefined where none arrived).
  // `input_in_pieces`: the caller's graph adds to the input's gradient too;
  // its pieces are then in block_gradients().input_pieces, and the gradient
  // returned is undefined (InputGradientPieces).
  torch::Tensor backward(long step, int block, const torch::Tensor& dy, std::vector<torch::Tensor> extra_grads = {},
                         bool input_in_pieces = false);
  // The gradients of the parameters of the block whose backward() returned
  // last (in its parameters() order; undefined where none arrived), once.
  StepContext::TakenGradients block_gradients() { return std::move(block_gradients_); }
  // Whether backward(step, block) runs step `step` again: a second
  // backward (a retained graph) reaching the last block of the step that
  // ended last. The step's input went with its end: resume_input() gives
  // it back first.
  bool runs_again(long step, int block) const {
    return !execution_ && step == step_id_ && step == finished_step_id_ && block == blocks() - 1;
  }
  void resume_input(long step, const torch::Tensor& x);
  // Abandons a begun step (its outputs were dropped without a backward).
  void cancel();
  // Abandons step `step` if it is still running.
  void abandon(long step) {
    if (step == step_id_) cancel();
  }
  // The step forward() began last (1, 2, ...); 0 before any.
  long step() const { return step_id_; }
  // The steps begun (calibration's not counted), and those of them that
  // ran a micro-step again after a rollback (m.step's reruns): refusals
  // number micro-steps as the caller's loop counts them, without these.
  // From here, the caller's code after the blocks takes what is free and
  // could do with `least` bytes more than are live (a chunked loss: its
  // chunks sized to what is free, or the whole logits where they fit):
  // what the code needs is learnt with that part at its least.
  void begin_elastic(Bytes least);
  long steps_begun() const { return steps_run_; }
  void count_steps_run_again(long steps) { steps_run_again_ += steps; }

  // Measuring the caller's sample: the caller runs its forward and a
  // backward once per round, between begin and end. Returns the rounds.
  // Round `rounds` (one past the last), if the caller runs it, measures
  // the sample again in another precision (under autocast) for the
  // caller's code after the blocks and an N% budget's reference only: the
  // blocks' own measurements stay those of the rounds before.
  // Gradients, generators and buffers are left as found; end_calibration()
  // throws Infeasible when the budget is below what the planner needs.
  int begin_calibration();
  void calibration_round(int round);
  // This round's model output holds `bytes` (its tensors' storages on the
  // device): what a loop that keeps it through its backward holds more
  // than the round, which lets it go first.
  void observe_output_bytes(Bytes bytes) { calibration_output_bytes_ = std::max<Bytes>(0, bytes); }
  // Whether the caller's loop keeps the model's output through its
  // backward: the least stated and the sizes no step measured yet count
  // its bytes (StepPlanner::set_output_held). Set before calibration.
  void set_output_held(bool held) { step_planner_.set_output_held(held); }
  bool output_held() const { return step_planner_.output_held(); }
  // The next step begins with `bytes` of the last step's output alive
  // (the caller's loop kept it): planned as resident, not counted twice
  // (StepPlanner::set_previous_output_bytes).
  void note_previous_output(Bytes bytes) { previous_output_bytes_ = bytes; }
  // The caller's backward that ran the last step's planned backward has
  // ended (autograd's queued callback; after each calibration round's):
  // what its autograd reached after block 0's backward is learnt.
  void end_of_backward();
  // During calibration: the caller's optimizer will hold `state_bytes` from
  // its first update on, and its update reaches `update_temp_bytes` above
  // them; `host_state_bytes` more for the weights in host memory, which
  // only N%'s reference counts (the plain step holds it on the device).
  void observe_optimizer(Bytes state_bytes, Bytes update_temp_bytes, Bytes host_state_bytes = 0);
  void end_calibration();
  // After calibration: an optimizer over the blocks' parameters that was
  // not measured (one a framework made: transformers' Trainer) updated for
  // the first time, leaving `state_bytes` of state, its update reaching
  // `update_temp_bytes` above what was live. An N% budget is of the plain
  // step with that state too (`host_state_bytes` of it the host weights'),
  // from the next step on.
  void count_optimizer(Bytes state_bytes, Bytes update_temp_bytes, Bytes host_state_bytes = 0);
  // Before that first update: it will make `state_bytes` of state, and
  // need `update_temp_bytes` above it while it runs. Where the budget
  // cannot hold them beside what is live, throws Infeasible (naming the
  // least budget to train with the state) now, before the update runs,
  // rather than be passed by it.
  void admit_optimizer(Bytes state_bytes, Bytes update_temp_bytes);
  // What an N% budget is of, and the optimizer's state counted so far: a
  // BlockSteps planned afresh over the same model (its head chunked from
  // then on) carries them into its calibration, so that N% stays of the
  // plain loop's step and goes on growing with a state counted late. With
  // any budget, what the steps' ends needed between steps: the model's own
  // head still runs where its whole logits fit, and its gradient can end a
  // step with more (a tied head's, summed out of place with the embeddings').
  struct ShareReference {
    Bytes reference = 0;  // 0: a budget in bytes
    Bytes optimizer_state = 0;
    Bytes optimizer_counted_late = 0;
    Bytes host_optimizer_state = 0;
    Bytes callers_need = 0;  // the code after the blocks in the reference step, at `size`
    std::int64_t size = 0;
    Bytes between_steps = 0;  // StepPlanner::between_steps()
  };
  ShareReference share_reference() const;
  void carry_share_reference(const ShareReference& carried) { carried_ = carried; }

  // A job group's device (SharedDevice), once calibration ended: tells the
  // group what this job's plain step of the sample (the reference of a
  // share, measured as "100%" measures it) and its least need, waits for
  // the group to start, and returns the group's budget.
  Bytes calibrated_for_lease(StepLease& lease);
  // From the next step on, each step's budget is leased from `lease` (at
  // most `group_budget`), asked with what its input is predicted to need;
  // the lease shrinks back when the next step begins or this ends. `lease`
  // outlives this.
  void lease_from(StepLease& lease, Bytes group_budget);
  // The lease the last step held shrinks back now (the job leaves its group).
  void end_lease();

  const StepRecord& last_step() const { return last_; }
  Bytes budget_bytes() const { return budget_.resolved() ? budget_.step_bytes() : 0; }
  // The budget from the next step on; N% is of the sample's measured peak
  // (StepBudget).
  void set_budget(const BudgetSpec& budget);
  // Blocks sharded by FSDP2: `gathered[i]` bytes of block i's whole weights
  // are gathered by its hooks around its calls and its backward (0 for a
  // block that is not sharded). Its forward runs with them, and with the
  // next block's when `forward_prefetch`; its backward with them, the
  // reduce-scatter's copy of its gradients and the block before's gather
  // (FSDP2's backward prefetch). Block 0's gather is live when a step
  // begins and is not counted as resident.
  void set_gathered_bytes(const std::vector<Bytes>& gathered, bool forward_prefetch);
  Chain largest_chain() const { return step_planner_.largest_chain(); }
  const plan::Planner& planner() const { return step_planner_.planner(); }

 private:
  void begin_step(const torch::Tensor& x);
  // A leased step of `size`: the lease the last step held shrinks back,
  // and this step's is granted (waiting for it) as the step's budget.
  void take_lease(std::int64_t size);
  // Whether a step out of budget stops and is run again. Not with sharded
  // blocks: running again reaches blocks whose weights are not gathered,
  // and gathering them is a collective the other ranks would not join, so
  // their steps are planned within the budget and a step over it is
  // reported (StepRecord::peak_bytes), not retried.
  bool enforces_budget() const { return planner().respects_budget() && !gathers_; }
  // A second backward of the step that ended last (backward(retain_graph=True)
  // before): runs its forward again, to where its first backward began.
  void run_step_again();
  // Throws Infeasible when no schedule is predicted to fit a step of `size`.
  void refuse_if_infeasible(std::int64_t size, StepChoice& choice);
  // Abandons the running step; one abandoned in the caller's code after
  // the blocks teaches the step planner what that code had reached.
  void abandon_running_step();
  // Runs the schedule up to block `block`'s return, retrying a step that
  // runs out of budget from its start.
  void run_forward_to(int block);
  void run_until_forward_of_later(int block);
  // Sharded blocks, after block `block`'s forward: when the memory the step
  // holds now, plus the rise its schedule predicts for the rest (scaled by
  // how far the blocks so far outgrew their prediction), passes the budget,
  // the blocks still to come are recomputed for their own backward, one by
  // one from the next, until the rest is predicted to fit. Nothing runs
  // again and no collective changes: the rank re-plans alone.
  void replan_rest_if_over(int block);
  void restart_schedule(const OutOfBudget& why);
  void run_backward_to(int block);
  // The step's backward to block `block`'s. Out of budget there: the step
  // again from its start under stricter plans, to that backward, when it
  // can be exact.
  void backward_to(int block);
  void end_step();
  void fold_caller_memory();
  // The caller's code after the blocks begins (the last block returned):
  // allocations past the budget spill the step's kept activations.
  void start_relief();
  void stop_relief();
  // The caller's code after the blocks reached `above` bytes above what was
  // alive as it began, at input `size` (measured by a step): learnt for that
  // size, and an N% budget's reference grows to cover it with every
  // gradient beside it (N% is of the caller's own loop).
  void learn_callers_need(std::int64_t size, Bytes above);
  // `reached` by the caller's code, capped at its elastic part's least (begin_elastic).
  Bytes at_elastic_least(Bytes reached) const;
  // A step's context: the default generator, the gradients taken.
  StepContext fresh_context();
  torch::Tensor exchange(const torch::Tensor& output);
  Bytes outer_gradient_bytes() const;  // of outer_parameters_' gradients alive now

  StagedModel model_;
  std::vector<torch::Tensor> outer_parameters_;
  GradientBoundary* boundary_;
  DeviceMemory& memory_;
  BlockStepsOptions options_;
  StepPlanner step_planner_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<HostWeights> host_weights_;  // options_.weights_on_host
  StepBudget budget_;
  long steps_run_ = 0;
  long steps_run_again_ = 0;  // count_steps_run_again()'s
  StepRecord last_, current_;
  // The next step, named as the caller's loop counts its micro-steps.
  std::string next_micro_step() const;

  // The running step.
  long step_id_ = 0;
  long finished_step_id_ = 0;  // the last step whose backward ended
  bool again_ = false;         // the running backward is a second one of a finished step
  int forwarded_ = -1;         // the last block whose call returned
  Batch batch_;
  StepContext ctx_;
  // Its schedule, attempts and budget (enforced until it ends, when its
  // planner respects the budget); kept after it ends for a second backward.
  std::optional<PlannedStep> step_;
  std::unique_ptr<ScheduleExecution> execution_;
  torch::Tensor dy_;  // the boundary's, until its forward takes it
  // Each block's parameters' gradients from its backward, until backward()
  // hands them over; what the last backward() handed over.
  std::vector<StepContext::TakenGradients> taken_;
  std::vector<std::vector<torch::Tensor>> extra_grads_;  // by block: backward()'s, until the step ends
  StepContext::TakenGradients block_gradients_;
  int input_in_pieces_ = -1;  // the block whose backward hands its input's gradient in pieces
  // Replaying the backward: whether every block got the gradient the one
  // after it made; the caller's gradient (a host copy); the generators when
  // it began; the gradient the last backward returned.
  bool can_replay_ = false;
  torch::Tensor kept_dy_, last_dx_;
  std::optional<RngSnapshot> after_caller_;
  Bytes caller_live_ = 0;         // device bytes when the last block returned
  Bytes caller_peak_ = 0;         // their peak until the backward reached it
  Bytes caller_gradients_ = 0;    // outer_gradient_bytes() when the last block returned
  bool in_callers_code_ = false;  // the last block returned; its backward has not begun
  Bytes elastic_least_ = -1;      // begin_elastic()'s: the peak its code needs at least; -1: none
  bool between_steps_ = false;    // a step ended; its backward has not: the device's peak is the caller's
  Bytes spilled_ = 0;             // bytes spilled since the last block returned
  // Makes room for the caller's code after the blocks (start_relief()).
  class SpillRelief : public MemoryRelief {
   public:
    explicit SpillRelief(BlockSteps& owner) : owner_(owner) {}
    Bytes relieve(Bytes bytes) override;
    // Raises torch's OutOfMemoryError, as PyTorch's own allocators do, in
    // the caller's terms: what the step needs at least, and what follows.
    void refuse(const OutOfBudget& why) override;

   private:
    BlockSteps& owner_;
  };
  SpillRelief relief_{*this};
  bool relieving_ = false;                // relief_ is the device's
  std::thread::id relief_thread_;         // the thread whose code after the blocks it serves
  Bytes end_live_ = 0;                    // device bytes when the last step ended
  Bytes step_start_live_ = 0;             // device bytes when the running step began
  std::map<std::int64_t, Bytes> needed_;  // by size: the least a finished step peaked above its start
  Bytes optimizer_state_ = 0;             // observe_optimizer()'s state, resident from the first update
  Bytes optimizer_counted_late_ = 0;      // count_optimizer()'s: the loop's, met at its first update
  Bytes host_optimizer_state_ = 0;        // the host weights' state: in host memory, in N%'s reference only
  // Sharded blocks: the running step's predicted chain, and its schedule
  // simulated on it, kept from block to block (replan_rest_if_over).
  struct Replanning {
    Chain chain;
    Schedule schedule;
    sim::SimResult planned;
  };
  std::optional<Replanning> replanning_;
  Bytes gathered_first_ = 0;                  // set_gathered_bytes(): block 0's gather
  bool gathers_ = false;                      // set_gathered_bytes(): some block is sharded
  std::chrono::steady_clock::time_point t0_;  // the step's start
  long synchronizations_at_start_ = 0;        // memory_.synchronizations() then

  // Calibration: the round the next step runs (-1: none), and the rounds
  // (begin_calibration()'s; the engine's Calibration says what each runs and learns).
  int calibration_round_ = -1;
  std::optional<Calibration> calibration_;
  // The round after the rounds: the caller's code again in another
  // precision, repeating round 0 (the reference where it is measured).
  bool callers_round() const { return calibration_ && calibration_round_ == calibration_->rounds(); }
  // The calibration round this step's measurement is (the caller's repeats 0).
  int measured_round() const { return callers_round() ? 0 : calibration_round_; }
  // A round whose step keeps everything, for an N% budget's reference.
  bool reference_round() const { return calibration_ && calibration_->is_reference(measured_round()); }
  // N%'s reference is measured by a round of its own, except with the weights
  // in host memory, whose plain step (every weight on the device) is not run.
  bool measures_reference() const { return budget_.is_share() && !host_weights_; }
  // With the weights in host memory: N%'s reference, the plain step with
  // every weight, gradient and optimizer state on the device, simulated on
  // the largest chain as `memtrain simulate` does.
  Bytes simulated_reference() const;
  std::optional<StepRollback> calibration_rollback_;  // what calibration found, put back after it
  Bytes calibration_live_ = 0;
  Bytes calibration_output_bytes_ = 0;  // observe_output_bytes(), this round's
  Bytes previous_output_bytes_ = 0;     // note_previous_output(), for the next step
  Signature sample_signature_;          // block 0's input in calibration: the sample's
  Bytes calibration_held_peak_ = 0;     // this round's code after the blocks at its peak, the output held
  // The caller's code after the blocks in the reference step: its need
  // (calibration's stand-in at first, then the most a step showed, scaled
  // to the reference's size) and that size.
  Bytes reference_callers_need_ = 0;
  std::int64_t reference_size_ = 0;
  ShareReference carried_;  // carry_share_reference()'s, joined at end_calibration()

  // A job group's device (lease_from()): leases asked step by step; whether
  // one is held, and whether its step ended.
  std::unique_ptr<LeasedSteps> leased_;
  bool lease_held_ = false;
  bool lease_step_taken_ = false;
  LeasedSteps::Grant lease_;  // the running step's
};

}  // namespace memtrain::runtime
