#include "runtime/execution/executor.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/schedule_interpreter.h"
#include "core/seconds_since.h"
#include "data/sentence_batcher.h"
#include "runtime/execution/failed_backward.h"
#include "runtime/execution/graph_leaves.h"
#include "runtime/execution/input_gradient_pieces.h"
#include "runtime/execution/saved_tensors.h"
#include "runtime/memory/enforcement_scope.h"
#include "runtime/memory/operation_times.h"
#include "runtime/model/classification_loss.h"
#include "runtime/model/part_seeds.h"
#include "runtime/model/rng_snapshot.h"

namespace memtrain::runtime {

static_assert(data::TokenBatch::kIgnoreTag == kIgnoreTarget, "the batchers pad with what the loss ignores");

namespace {

class AutocastCacheOff {
 public:
  AutocastCacheOff() : was_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(was_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool was_;
};

using Clock = std::chrono::steady_clock;

}  // namespace

// Named, not anonymous: LibTorchBackend, which ScheduleExecution holds, keeps these.
namespace execution {

// One micro-batch's share of a step: its rows of the batch, its context
// (targets, padding, its own generator) and the share of the loss it carries.
struct MicroBatchInput {
  torch::Tensor input;
  StepContext ctx;
  double loss_weight = 1;
};

std::vector<MicroBatchInput> split_batch(const Batch& batch, const StepContext& ctx, int count, DeviceMemory& memory) {
  const std::int64_t rows = batch.input.size(0);
  if (rows < count) {
    throw Error("executor: a batch of " + std::to_string(rows) + " examples cannot be split into " +
                std::to_string(count) + " micro-batches; expected at most " + std::to_string(rows));
  }
  // Each micro-batch draws its dropout from its own generator, seeded from
  // the step's (or given, for a rank's share of the ranks' micro-batches):
  // its masks are the same whatever order the schedule runs them in.
  const std::vector<std::uint64_t> seeds =
      ctx.micro_seeds.empty() ? draw_part_seeds(ctx.generator, count) : ctx.micro_seeds;
  MEMTRAIN_ASSERT(static_cast<int>(seeds.size()) == count, "a dropout seed per micro-batch");
  const double all_counted = ctx.micro_loss_denominator > 0
                                 ? ctx.micro_loss_denominator
                                 : std::max<double>(1, batch.targets.ne(kIgnoreTarget).sum().item<double>());
  std::vector<MicroBatchInput> parts(count);
  for (int m = 0; m < count; ++m) {
    // The rows a device micro-batch of the Trainer's runs (batch_rows): one split rule.
    const Batch rows_of_m = batch_rows(batch, m, count);
    MicroBatchInput& part = parts[m];
    part.input = rows_of_m.input;
    part.ctx = ctx;
    part.ctx.targets = rows_of_m.targets;
    if (batch.key_padding.defined()) part.ctx.key_padding = rows_of_m.key_padding;
    part.ctx.generator = memory.make_generator(seeds[m]);
    // The loss is a mean over counted targets: each micro-batch's mean
    // weighs by its share of them, so the step's gradient is the whole batch's.
    part.loss_weight = part.ctx.targets.ne(kIgnoreTarget).sum().item<double>() / all_counted;
  }
  return parts;
}

using Copies = std::vector<std::unique_ptr<HostCopy>>;

// One micro-batch's tensors. x[i]: a_i held on its own; graph[i]: the output
// of stage i's forward with grad (its x̄_i); leaf[i]: that forward's input;
// offloading[i]: x_i's copy to host, until Release; arriving[i]: its copy
// back, until the first op that reads it; on_host[i]: x_i in host memory.
// saved[i]: what the forward with grad saved, when the schedule moves it
// or the run may spill it; saved_leaving[i] / saved_arriving[i]: its
// copies in flight; spilled[i]: spill() moved it to host memory;
// started[i]: where that forward's graph began.
struct MicroTensors {
  std::vector<torch::Tensor> x, graph, leaf, on_host;
  std::vector<GraphStart> started;
  std::vector<std::vector<torch::Tensor>> extras;  // stage i's extra_outputs() of that forward
  std::vector<std::optional<RngSnapshot>> first_forward;
  std::vector<std::unique_ptr<HostCopy>> offloading, arriving;
  std::vector<std::unique_ptr<SavedTensors>> saved;
  std::vector<Copies> saved_leaving, saved_arriving;
  std::vector<char> moves_saved;  // the schedule offloads stage i's saved tensors
  std::vector<char> spilled;      // spill() moved stage i's saved tensors to host memory
  torch::Tensor grad;             // the gradient flowing backward
  explicit MicroTensors(int n)
      : x(n + 1), graph(n), leaf(n), on_host(n + 1), started(n), extras(n), first_forward(n), offloading(n + 1),
        arriving(n + 1), saved(n), saved_leaving(n), saved_arriving(n), moves_saved(n, 0), spilled(n, 0) {}
};

}  // namespace execution

using execution::Copies;
using execution::MicroBatchInput;
using execution::MicroTensors;
using execution::split_batch;

// Runs each operation the interpreter hands it on LibTorch and measures it.
// The interpreter has checked the operation against the schedule's state;
// what is checked here is only what LibTorch itself must agree with.
class LibTorchBackend : public ScheduleBackend {
 public:
  LibTorchBackend(StagedModel& model, DeviceMemory& memory, std::unique_ptr<HostTransfers>& transfers,
                  HostWeights* host_weights, GradientReducer* reducer, const Schedule& schedule, Batch batch,
                  StepContext& ctx, bool spillable)
      : model_(model), memory_(memory), transfers_(transfers), host_weights_(host_weights), reducer_(reducer),
        batch_(std::move(batch)), ctx_(ctx), n_(model.size()), micro_batches_(schedule.micro_batches()),
        spillable_(spillable), weights_arriving_(n_), grads_arriving_(n_), grads_leaving_(n_) {
    for (int m = 0; m < micro_batches_; ++m) micro_.emplace_back(n_);
    for (const Op& op : schedule.ops) {
      if (op.kind == OpKind::OffloadSaved && op.stage >= 0 && op.stage < n_ && op.micro >= 0 &&
          op.micro < micro_batches_) {
        micro_[op.micro].moves_saved[op.stage] = 1;
      }
    }
    if (micro_batches_ > 1) {
      parts_ = split_batch(batch_, ctx, micro_batches_, memory_);
      for (int m = 0; m < micro_batches_; ++m) micro_[m].x[0] = parts_[m].input;
    } else {
      micro_[0].x[0] = batch_.input;
    }
    result_.ops.reserve(schedule.ops.size());
    memory_.reset_peak();
    start_ = Clock::now();
  }

  // An execution that ends part way (rolled back, abandoned) leaves no
  // stage's weights on the device for the caller's updates to miss; the
  // Trainer's own steps abandon theirs (HostWeights::abandon).
  ~LibTorchBackend() override {
    if (host_weights_ && host_weights_->caller_updates()) host_weights_->drop_all();
  }
  LibTorchBackend(const LibTorchBackend&) = delete;
  LibTorchBackend& operator=(const LibTorchBackend&) = delete;

  // Waits for the device once and reads what the operations measured on
  // it: their times, the loss and the loss stage's counts.
  void settle() {
    for (Seconds seconds : times_.settle()) result_.ops[settled_++].seconds = seconds;
    for (const auto& [loss, weight] : losses_) result_.loss += weight * loss.item<double>();
    losses_.clear();
    for (int m = 0; m < micro_batches_; ++m) context(m).settle_counts();
  }

  ExecutionResult finish() {
    settle();
    if (micro_batches_ > 1) {
      for (const MicroBatchInput& part : parts_) {
        ctx_.correct += part.ctx.correct;
        ctx_.counted += part.ctx.counted;
      }
    }
    // The step ends when the host's updates have (the Simulator's host
    // timeline) and every gradient sum has (its network timeline).
    if (host_weights_) host_weights_->wait_for_updates();
    if (reducer_) result_.reduce = reducer_->finish();
    result_.seconds = seconds_since(start_);
    return std::move(result_);
  }

  // Nothing here waits for the device: the allocator's counts are the
  // host's, current as each kernel is queued, and an operation's time is
  // read between marks in the device's queue when the step settles.
  void before_op(size_t, const Op& op) override {
    rec_ = OpRecord{op};
    rec_.live_before = memory_.live();
    memory_.reset_peak();
    times_.start();
  }
  void after_op(size_t, const Op&) override {
    times_.stop();
    rec_.peak = std::max(memory_.peak(), rec_.live_before);
    rec_.live_after = memory_.live();
    result_.peak = std::max(result_.peak, rec_.peak);
    result_.ops.push_back(rec_);
  }

  void forward_all(const Op& op, const ScheduleState&) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    StepContext& c = context(op.micro);
    rec_.wait_seconds = compute_ready(ms, i);
    const torch::Tensor in = input_of(ms, i);
    MEMTRAIN_ASSERT(in.defined(), "an available input has a tensor");
    rec_.input_bytes = input_bytes(i, in);
    torch::AutoGradMode grad_on(true);
    // Casts made afresh, as in forward_no_grad: the cache could hand the
    // stage a weight's copy cast by an earlier run (a step run again inside
    // the caller's autocast), from another graph.
    const AutocastCacheOff uncached;
    ms.leaf[i] =
        (i == 0 || !in.is_floating_point()) ? in : in.detach().requires_grad_(model_.stage(i).input_needs_gradient());
    ms.started[i] = GraphStart::now();
    c.variant = op.variant;
    ms.spilled[i] = 0;
    if (ms.moves_saved[i] || spillable_) {
      ms.saved[i] = std::make_unique<SavedTensors>();
      SavedTensors::Capture capture(*ms.saved[i]);
      ms.graph[i] = forward(ms, c, i, ms.leaf[i]);
    } else {
      ms.graph[i] = forward(ms, c, i, ms.leaf[i]);
    }
    c.variant = 0;
    ms.extras[i] = model_.stage(i).extra_outputs();
    rec_.output_bytes = static_cast<Bytes>(ms.graph[i].nbytes());
  }

  void forward_no_grad(const Op& op, const ScheduleState&, bool frees_input) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    rec_.wait_seconds = compute_ready(ms, i);
    const torch::Tensor in = input_of(ms, i);
    MEMTRAIN_ASSERT(in.defined(), "an available input has a tensor");
    rec_.input_bytes = input_bytes(i, in);
    torch::NoGradGuard no_grad;
    // Autocast would keep the stage's weights' low-precision copies until
    // the forward ends (its cache): a stage that keeps nothing keeps them
    // neither. Each op casts them again, to the same values.
    const AutocastCacheOff uncached;
    ms.x[i + 1] = forward(ms, context(op.micro), i, in);
    rec_.output_bytes = static_cast<Bytes>(ms.x[i + 1].nbytes());
    // The batch itself stays: its caller holds it for the whole step anyway.
    if (frees_input && i > 0) ms.x[i] = torch::Tensor();
  }

  void loss(const Op& op, const ScheduleState&) override {
    MicroTensors& ms = micro_[op.micro];
    // A device's loss is read when the step settles: reading it now would
    // wait for the device. The CPU's is there already.
    const torch::Tensor loss = ms.graph[n_ - 1].detach();
    ms.grad = torch::ones_like(ms.graph[n_ - 1]);
    // With micro-batches, each one's share of the step's loss; else the share
    // of a step the trainer split that this run carries.
    const double weight = micro_batches_ > 1 ? parts_[op.micro].loss_weight : ctx_.loss_weight;
    if (loss.is_cpu()) {
      result_.loss += weight * loss.item<double>();
    } else {
      losses_.emplace_back(loss, weight);
    }
    if (micro_batches_ > 1 || weight != 1) ms.grad.mul_(weight);
  }

  void backward(const Op& op, const ScheduleState&, bool frees_input, bool) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    rec_.wait_seconds = compute_ready(ms, i) + finish_all(grads_arriving_[i]) + finish_all(ms.saved_arriving[i]);
    if (!ms.saved_arriving[i].empty()) ms.saved[i]->arrived();
    ms.saved_arriving[i].clear();
    if (ms.spilled[i]) rec_.wait_seconds += unspill(ms, i);
    torch::Tensor next;
    if (ms.graph[i].requires_grad()) {
      // Start from the output's gradient edge and let the output go first:
      // unless a kernel saved it for the backward (ReLU does), its bytes
      // are free during the backward. The measured backward temporaries
      // then come out lower by them, so the memory model stays exact.
      const torch::autograd::Edge root = torch::autograd::impl::gradient_edge(ms.graph[i]);
      ms.graph[i] = torch::Tensor();
      if (ctx_.take_gradients) {
        next = take_gradients(ms, i, root);
      } else {
        torch::autograd::Engine::get_default_engine().execute({root}, {ms.grad}, /*keep_graph=*/false,
                                                              /*create_graph=*/false, /*accumulate_grad=*/true);
      }
    }
    if (!ctx_.take_gradients && ms.leaf[i].defined() && ms.leaf[i].requires_grad()) next = ms.leaf[i].grad();
    ms.graph[i] = torch::Tensor();
    ms.extras[i].clear();
    ms.leaf[i] = torch::Tensor();
    ms.saved[i].reset();
    if (frees_input && i > 0) ms.x[i] = torch::Tensor();
    ms.grad = next;
  }

  // Stage i's backward with its gradients returned, not accumulated: its
  // input's, which it returns, and its leaves', which go to
  // ctx_.take_gradients (undefined where none reached one): the stage's
  // gradient_leaves(), and every other leaf its graph reached.
  torch::Tensor take_gradients(MicroTensors& ms, int i, const torch::autograd::Edge& root) {
    MEMTRAIN_ASSERT(micro_batches_ == 1 && (!host_weights_ || host_weights_->caller_updates()) && !reducer_,
                    "gradients taken from the backward: one micro-batch, the caller's updates, one rank");
    const bool input_edge = ms.leaf[i].defined() && ms.leaf[i].requires_grad();
    if (i > 0 && input_edge && ms.leaf[i].grad().defined()) refuse_escaped_output(i);
    StepContext::TakenGradients taken{model_.stage(i).gradient_leaves(), {}};
    std::vector<torch::Tensor>& leaves = taken.leaves;
    torch::autograd::edge_list outputs;
    std::vector<int> index;  // where each leaf's gradient is in the engine's answer
    if (input_edge) outputs.push_back(torch::autograd::impl::gradient_edge(ms.leaf[i]));
    for (const torch::Tensor& leaf : leaves) {
      index.push_back(leaf.requires_grad() ? static_cast<int>(outputs.size()) : -1);
      if (leaf.requires_grad()) outputs.push_back(torch::autograd::impl::gradient_edge(leaf));
    }
    // The backward starts from the output and from the other results the
    // caller's loss read.
    torch::autograd::edge_list roots{root};
    torch::autograd::variable_list root_grads{ms.grad};
    if (ctx_.extra_output_gradients) {
      const std::vector<torch::Tensor> extra = ctx_.extra_output_gradients(i);
      for (size_t k = 0; k < extra.size() && k < ms.extras[i].size(); ++k) {
        if (!extra[k].defined() || !ms.extras[i][k].requires_grad()) continue;
        roots.push_back(torch::autograd::impl::gradient_edge(ms.extras[i][k]));
        root_grads.push_back(extra[k]);
      }
    }
    std::vector<InputUse> uses;
    const torch::autograd::Node* input = input_edge ? outputs.front().function.get() : nullptr;
    for (torch::Tensor& other : other_leaves(roots, outputs, ms.started[i], model_.stage_name(i), input, &uses)) {
      leaves.push_back(std::move(other));
      index.push_back(static_cast<int>(outputs.size()));
      outputs.push_back(torch::autograd::impl::gradient_edge(leaves.back()));
    }
    taken.input_uses = static_cast<int>(uses.size());
    std::optional<InputGradientPieces> pieces;
    if (input_edge && ctx_.input_gradient_in_pieces && ctx_.input_gradient_in_pieces(i) &&
        std::all_of(uses.begin(), uses.end(), [](const InputUse& use) { return use.node != nullptr; })) {
      pieces.emplace(uses, ms.leaf[i]);
      outputs.insert(outputs.end(), pieces->sinks().begin(), pieces->sinks().end());
    }
    torch::autograd::variable_list grads = torch::autograd::Engine::get_default_engine().execute(
        roots, root_grads, /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/false, outputs);
    taken.gradients.resize(leaves.size());
    for (size_t k = 0; k < leaves.size(); ++k) {
      if (index[k] >= 0) taken.gradients[k] = std::move(grads[index[k]]);
      // A weight kept in host memory gets its gradient there at once: the
      // caller accumulates it beside the weight, not on the device.
      if (host_weights_ && host_weights_->holds(i, leaves[k]))
        taken.gradients[k] = host_weights_->gradient_to_host(taken.gradients[k], transfers());
    }
    if (pieces) taken.input_pieces = pieces->take();
    ctx_.take_gradients(i, std::move(taken));
    return input_edge && !pieces ? std::move(grads[0]) : torch::Tensor();
  }

  // Stage i's own input (a leaf of memtrain's) has a gradient before its
  // backward ran: a backward outside memtrain ran part of the stage's graph,
  // reaching it through a tensor the stage computed that left it besides
  // its output. Running the stage's backward now would run that part twice.
  [[noreturn]] void refuse_escaped_output(int i) const {
    throw UsageError(model_.stage_name(i) +
                     ": a tensor it computed reached the loss besides its output (a hook that records a "
                     "submodule's output: transformers' output_router_logits or output_attentions, for one), and "
                     "the backward ran into the block from there; memtrain runs a block's backward on its own and "
                     "cannot take that tensor's gradient: train without recording it");
  }

  void offload(const Op& op, const ScheduleState&) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    rec_.wait_seconds = arrive(ms, i);  // a copy cannot leave before it arrived
    ms.offloading[i] = transfers().to_host(ms.x[i]);
    rec_.input_bytes = static_cast<Bytes>(ms.x[i].nbytes());
    count_copy(rec_.input_bytes, /*to_host=*/true, /*weights=*/false);
  }

  void release(const Op& op, const ScheduleState&) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    rec_.wait_seconds = finish(*ms.offloading[i]);
    ms.on_host[i] = ms.offloading[i]->destination();
    ms.offloading[i].reset();
    ms.x[i] = torch::Tensor();
  }

  void prefetch(const Op& op, const ScheduleState&) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    ms.arriving[i] = transfers().to_device(ms.on_host[i]);
    ms.x[i] = ms.arriving[i]->destination();
    ms.on_host[i] = torch::Tensor();
    rec_.output_bytes = static_cast<Bytes>(ms.x[i].nbytes());
    count_copy(rec_.output_bytes, /*to_host=*/false, /*weights=*/false);
  }

  void offload_saved(const Op& op, const ScheduleState&) override {
    const int i = op.stage;
    MicroTensors& ms = micro_[op.micro];
    MEMTRAIN_ASSERT(ms.saved[i], "a forward with grad the schedule offloads captured what it saved");
    rec_.wait_seconds = finish_all(ms.saved_arriving[i]);  // a copy cannot leave before it arrived
    if (!ms.saved_arriving[i].empty()) ms.saved[i]->arrived();
    ms.saved_arriving[i].clear();
    ms.saved_leaving[i] = ms.saved[i]->offload(transfers());
    rec_.input_bytes = bytes_of(ms.saved_leaving[i]);
    count_copy(rec_.input_bytes, /*to_host=*/true, /*weights=*/false);
  }

  void release_saved(const Op& op, const ScheduleState&) override {
    MicroTensors& ms = micro_[op.micro];
    rec_.wait_seconds = finish_all(ms.saved_leaving[op.stage]);
    ms.saved[op.stage]->release(ms.saved_leaving[op.stage]);
    ms.saved_leaving[op.stage].clear();
  }

  void prefetch_saved(const Op& op, const ScheduleState&) override {
    MicroTensors& ms = micro_[op.micro];
    ms.saved_arriving[op.stage] = ms.saved[op.stage]->prefetch(transfers());
    rec_.output_bytes = bytes_of(ms.saved_arriving[op.stage]);
    count_copy(rec_.output_bytes, /*to_host=*/false, /*weights=*/false);
  }

  void fetch_weights(const Op& op, const ScheduleState&) override {
    weights_arriving_[op.stage] = host_weights().fetch(op.stage, transfers());
    rec_.output_bytes = bytes_of(weights_arriving_[op.stage]);
    count_copy(rec_.output_bytes, /*to_host=*/false, /*weights=*/true);
  }

  void drop_weights(const Op& op, const ScheduleState&, bool grads_leaving) override {
    const int i = op.stage;
    rec_.wait_seconds = finish_all(weights_arriving_[i]) + finish_all(grads_leaving_[i]);
    weights_arriving_[i].clear();
    if (grads_leaving) host_weights().grads_arrived(i, grads_leaving_[i]);
    grads_leaving_[i].clear();
    host_weights().drop(i);
  }

  void offload_grads(const Op& op, const ScheduleState&) override {
    if (host_weights().caller_updates()) return;  // each backward sent its gradients to the host
    const int i = op.stage;
    rec_.wait_seconds = finish_all(grads_arriving_[i]);
    // The gradients that leave are the ranks' sum.
    if (reducer_) rec_.wait_seconds += reducer_->wait_for(bucket_holding(reducer_->first_stages(), i));
    grads_arriving_[i].clear();
    grads_leaving_[i] = host_weights().offload_grads(i, transfers());
    rec_.input_bytes = bytes_of(grads_leaving_[i]);
    count_copy(rec_.input_bytes, /*to_host=*/true, /*weights=*/true);
  }

  void fetch_grads(const Op& op, const ScheduleState&) override {
    MEMTRAIN_ASSERT(!host_weights().caller_updates(), "the caller's gradients stay in host memory");
    grads_arriving_[op.stage] = host_weights().fetch_grads(op.stage, transfers());
    rec_.output_bytes = bytes_of(grads_arriving_[op.stage]);
    count_copy(rec_.output_bytes, /*to_host=*/false, /*weights=*/true);
  }

  void update(const Op& op, const ScheduleState&) override {
    if (host_weights().caller_updates()) return;  // the caller's optimizer updates the weights
    const int i = op.stage;
    rec_.wait_seconds = finish_all(grads_leaving_[i]);
    if (!grads_leaving_[i].empty()) host_weights().grads_arrived(i, grads_leaving_[i]);
    grads_leaving_[i].clear();
    host_weights().update(i);
  }

  void all_reduce(const Op&, const ScheduleState&, int bucket) override {
    MEMTRAIN_ASSERT(reducer_, "the interpreter refuses AllReduce without buckets to sum");
    rec_.wait_seconds = reducer_->start(bucket);
  }

  // Note [spilling]: code outside the schedule (the caller's, between two
  // of its operations) may need more than the budget leaves it while the
  // step keeps activations for its backward. Those kept by a forward with
  // grad can wait in host memory instead: spill() moves them there, the
  // stages whose backward comes last first, until `wanted` bytes are free,
  // and each stage's backward brings its own back first. The bytes that
  // come back are those that left, so the step computes what it would have.
  // The schedule is not changed: to it the tensors never moved.
  Bytes spill(Bytes wanted) {
    const Bytes before = memory_.live();
    for (int i = 0; i < n_ && before - memory_.live() < wanted; ++i) {
      for (MicroTensors& ms : micro_) {
        SavedTensors* saved = ms.saved[i].get();
        if (!saved || ms.moves_saved[i] || ms.spilled[i] || !ms.graph[i].defined() || saved->on_host()) continue;
        Copies leaving = saved->offload(transfers());
        const Bytes bytes = bytes_of(leaving);
        finish_all(leaving);
        saved->release(leaving);
        ms.spilled[i] = 1;
        count_copy(bytes, /*to_host=*/true, /*weights=*/false);
      }
    }
    return before - memory_.live();
  }

  torch::Tensor output_of(int i) const {
    const MicroTensors& ms = micro_.at(0);
    // Detached: what the caller does to its tensor never touches the step's.
    if (ms.x.at(i + 1).defined()) return ms.x[i + 1].detach();
    if (ms.graph.at(i).defined()) return ms.graph[i].detach();
    return {};
  }
  torch::Tensor gradient() const { return micro_.at(0).grad; }
  void set_gradient(torch::Tensor gradient) { micro_.at(0).grad = std::move(gradient); }
  ExecutionResult& result() { return result_; }

 private:
  StepContext& context(int m) { return micro_batches_ > 1 ? parts_[m].ctx : ctx_; }
  HostTransfers& transfers() {
    if (!transfers_) transfers_ = memory_.make_transfers();
    return *transfers_;
  }
  HostWeights& host_weights() {
    MEMTRAIN_ASSERT(host_weights_, "weight operations reach the executor only with weights in host memory");
    return *host_weights_;
  }

  // Compute waits for `copy` to end; returns the wait.
  Seconds finish(HostCopy& copy) {
    const Clock::time_point t0 = Clock::now();
    copy.wait();
    const Seconds waited = seconds_since(t0);
    CopyStats& c = result_.copies;
    (copy.to_host() ? c.to_host_stall_seconds : c.to_device_stall_seconds) += waited;
    (copy.to_host() ? c.to_host_seconds : c.to_device_seconds) += copy.seconds();
    return waited;
  }
  Seconds finish_all(Copies& copies) {
    Seconds waited = 0;
    for (auto& c : copies) waited += finish(*c);
    return waited;
  }
  // Stage i's saved tensors, spilled, back on the device (Note [spilling]);
  // returns the wait.
  Seconds unspill(MicroTensors& ms, int i) {
    Copies arriving = ms.saved[i]->prefetch(transfers());
    count_copy(bytes_of(arriving), /*to_host=*/false, /*weights=*/false);
    const Seconds waited = finish_all(arriving);
    ms.saved[i]->arrived();
    ms.spilled[i] = 0;
    return waited;
  }
  // Compute waits until x_i's copy back, if any, has arrived.
  Seconds arrive(MicroTensors& ms, int i) {
    if (!ms.arriving[i]) return 0;
    const Seconds waited = finish(*ms.arriving[i]);
    ms.arriving[i].reset();
    return waited;
  }
  // Before compute on stage i reads x_i: its copy back, and the stage's
  // weights when they live in host memory, must have arrived.
  Seconds compute_ready(MicroTensors& ms, int i) {
    Seconds waited = arrive(ms, i);
    if (host_weights_) {
      waited += finish_all(weights_arriving_[i]);
      weights_arriving_[i].clear();
    }
    return waited;
  }
  // Bytes copied, by direction and by what moved (weights and gradients, or activations).
  void count_copy(Bytes bytes, bool to_host, bool weights) {
    (to_host ? result_.copies.to_host_bytes : result_.copies.to_device_bytes) += bytes;
    if (weights) result_.copies.weight_bytes += bytes;
  }
  static Bytes bytes_of(const Copies& copies) {
    Bytes b = 0;
    for (const auto& c : copies) b += static_cast<Bytes>(c->destination().nbytes());
    return b;
  }
  static torch::Tensor input_of(MicroTensors& ms, int i) {
    if (ms.x[i].defined()) return ms.x[i];
    if (i > 0 && ms.graph[i - 1].defined()) return ms.graph[i - 1].detach();
    return {};
  }
  Bytes input_bytes(int i, const torch::Tensor& in) const {
    if (i > 0) return static_cast<Bytes>(in.nbytes());
    return micro_batches_ > 1 ? batch_.bytes() * in.size(0) / batch_.input.size(0) : batch_.bytes();
  }
  // Runs stage i forward; replays the generators when it ran before this step.
  torch::Tensor forward(MicroTensors& ms, StepContext& c, int i, const torch::Tensor& in) {
    std::optional<RngSnapshot> resume;
    if (ms.first_forward[i]) {
      resume = RngSnapshot::capture(c.generator);
      ms.first_forward[i]->restore(c.generator);
    } else {
      ms.first_forward[i] = RngSnapshot::capture(c.generator);
    }
    const bool update_buffers = c.update_buffers;
    c.update_buffers = update_buffers && !resume;
    torch::Tensor out = model_.stage(i).forward(in, c);
    c.update_buffers = update_buffers;
    if (resume) resume->restore(c.generator);
    return out;
  }

  StagedModel& model_;
  DeviceMemory& memory_;
  std::unique_ptr<HostTransfers>& transfers_;  // the executor's, made at the first copy
  HostWeights* host_weights_;
  GradientReducer* reducer_;  // a data-parallel rank's gradient sums; null: one process
  const Batch batch_;
  StepContext& ctx_;
  const int n_;
  const int micro_batches_;
  const bool spillable_;  // forwards with grad keep what they save movable (Note [spilling])
  std::vector<MicroTensors> micro_;
  std::vector<MicroBatchInput> parts_;  // with micro-batches: each one's rows and context
  // Weights in host memory: copies of a stage's weights or gradients in
  // flight to the device, and of its gradients to the host.
  std::vector<Copies> weights_arriving_, grads_arriving_, grads_leaving_;
  ExecutionResult result_;
  OpRecord rec_{Op{OpKind::Loss, -1}};  // the operation being run
  Clock::time_point start_;
  OperationTimes times_{memory_};                         // the operations' device times, until settle() reads them
  size_t settled_ = 0;                                    // the operations whose times settle() has read
  std::vector<std::pair<torch::Tensor, double>> losses_;  // on the device until settle(), with their weights
};

ScheduleExecution::ScheduleExecution(std::unique_ptr<LibTorchBackend> backend, ScheduleLimits limits,
                                     DeviceMemory& memory, const Schedule& schedule)
    : backend_(std::move(backend)), memory_(memory),
      run_(std::make_unique<ScheduleRun>(schedule, std::move(limits), *backend_)) {}

ScheduleExecution::~ScheduleExecution() {
  // The run refers to the backend.
  run_.reset();
  backend_.reset();
  if (!failed_) return;
  // The attempt's tensors are gone; what its backward left queued goes too,
  // outside the budget (a few bytes) so that dropping it cannot run out.
  EnforcementScope outside_the_budget(memory_, false);
  try {
    drop_work_of_failed_backwards();
  } catch (...) {
    // A destructor cannot throw: the queue then drains at the next backward.
  }
}

void ScheduleExecution::step() {
  try {
    run_->step();
  } catch (const OutOfBudget&) {
    failed_ = true;
    throw;
  } catch (const std::exception& e) {
    failed_ = true;
    if (!memory_.is_out_of_budget(e)) throw;
    throw OutOfBudget(memory_.describe(), 0, memory_.live(), memory_.budget());
  }
}

ExecutionResult ScheduleExecution::finish() {
  while (!done()) step();
  run_->finish();  // the end checks
  return backend_->finish();
}

void ScheduleExecution::continue_with(Schedule schedule) {
  // Which stages' saved tensors move was read from the first schedule.
  const auto moves_saved = [](const Schedule& s) {
    return std::any_of(s.ops.begin(), s.ops.end(), [](const Op& op) { return op.kind == OpKind::OffloadSaved; });
  };
  MEMTRAIN_ASSERT(!moves_saved(schedule) && !moves_saved(run_->schedule()),
                  "a schedule changed while it runs moves no saved tensors");
  run_->continue_with(std::move(schedule));
}

Bytes ScheduleExecution::spill(Bytes wanted) { return backend_->spill(wanted); }
torch::Tensor ScheduleExecution::output_of(int stage) const { return backend_->output_of(stage); }
torch::Tensor ScheduleExecution::gradient() const { return backend_->gradient(); }
void ScheduleExecution::set_gradient(torch::Tensor gradient) { backend_->set_gradient(std::move(gradient)); }
ExecutionResult& ScheduleExecution::result() { return backend_->result(); }
void ScheduleExecution::settle() { backend_->settle(); }

ExecutionResult Executor::run(const Schedule& schedule, const Batch& batch, StepContext& ctx,
                              GradientReducer* reducer) {
  // Recomputation replays the step's random draws from it (dropout).
  if (!ctx.generator.defined()) throw Error("executor: StepContext::generator is not set; give the step a generator");
  auto backend =
      std::make_unique<LibTorchBackend>(model_, memory_, transfers_, host_weights_, reducer, schedule, batch, ctx,
                                        /*spillable=*/false);
  return ScheduleExecution(std::move(backend), limits(reducer), memory_, schedule).finish();
}

std::unique_ptr<ScheduleExecution> Executor::start(const Schedule& schedule, const Batch& batch, StepContext& ctx) {
  if (!ctx.generator.defined()) throw Error("executor: StepContext::generator is not set; give the step a generator");
  auto backend = std::make_unique<LibTorchBackend>(model_, memory_, transfers_, host_weights_, nullptr, schedule, batch,
                                                   ctx, spillable_);
  return std::make_unique<ScheduleExecution>(std::move(backend), limits(nullptr), memory_, schedule);
}

ScheduleLimits Executor::limits(const GradientReducer* reducer) const {
  ScheduleLimits limits;
  for (int i = 0; i < model_.size(); ++i) {
    limits.variants.push_back(1 + static_cast<int>(model_.stage(i).variant_names().size()));
  }
  limits.weights_on_host = host_weights_ != nullptr;
  if (reducer) limits.reduce_buckets = reducer->first_stages();
  return limits;
}

}  // namespace memtrain::runtime
