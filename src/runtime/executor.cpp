#include "runtime/executor.h"

#include <chrono>
#include <optional>

#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"
#include "runtime/rng_snapshot.h"
#include "runtime/saved_tensors.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

Error cannot_run(const Op& op, const std::string& why) {
  const std::string stage = op.kind == OpKind::Loss ? "" : " " + std::to_string(op.stage);
  return Error(std::string("executor: ") + op_kind_name(op.kind) + stage + ": " + why);
}

}  // namespace

ExecutionResult Executor::run(const Schedule& schedule, const Batch& batch, StepContext& ctx) {
  // Recomputation replays the step's random draws from it (dropout).
  if (!ctx.generator.defined()) throw Error("executor: StepContext::generator is not set; give the step a generator");
  try {
    return run_unchecked(schedule, batch, ctx);
  } catch (const OutOfBudget&) {
    throw;
  } catch (const std::exception& e) {
    if (!memory_.is_out_of_budget(e)) throw;
    throw OutOfBudget(memory_.describe(), 0, memory_.live(), memory_.budget());
  }
}

namespace {

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
  // the step's: its masks are the same whatever order the schedule runs
  // the micro-batches in.
  const torch::Tensor seeds =
      torch::empty({count}, torch::TensorOptions().dtype(torch::kLong).device(ctx.generator.device()))
          .random_(0, std::int64_t{1} << 62, ctx.generator)
          .cpu();
  const double all_counted = std::max<double>(1, batch.targets.ne(-100).sum().item<double>());
  std::vector<MicroBatchInput> parts(count);
  std::int64_t offset = 0;
  for (int m = 0; m < count; ++m) {
    const std::int64_t length = rows / count + (m < rows % count ? 1 : 0);
    MicroBatchInput& part = parts[m];
    part.input = batch.input.narrow(0, offset, length);
    part.ctx = ctx;
    part.ctx.targets = batch.targets.narrow(0, offset, length);
    if (batch.key_padding.defined()) part.ctx.key_padding = batch.key_padding.narrow(0, offset, length);
    part.ctx.generator = memory.make_generator(static_cast<std::uint64_t>(seeds[m].item<std::int64_t>()));
    // The loss is a mean over counted targets: each micro-batch's mean
    // weighs by its share of them, so the step's gradient is the whole batch's.
    part.loss_weight = part.ctx.targets.ne(-100).sum().item<double>() / all_counted;
    offset += length;
  }
  return parts;
}

using Copies = std::vector<std::unique_ptr<HostCopy>>;

}  // namespace

ExecutionResult Executor::run_unchecked(const Schedule& schedule, const Batch& batch, StepContext& ctx) {
  const int n = model_.size();
  const int micro_batches = schedule.micro_batches();
  // Per micro-batch: x[i]: a_i held on its own; graph[i]: the output of
  // stage i's forward with grad (its x̄_i); leaf[i]: that forward's input;
  // offloading[i]: x_i's copy to host, until Release; arriving[i]: its copy
  // back, until the first op that reads it; on_host[i]: x_i in host memory.
  // saved[i]: what the forward with grad saved, when the schedule moves it;
  // saved_leaving[i] / saved_arriving[i]: its copies in flight.
  struct MicroState {
    std::vector<torch::Tensor> x, graph, leaf, on_host;
    std::vector<std::optional<RngSnapshot>> first_forward;
    std::vector<std::unique_ptr<HostCopy>> offloading, arriving;
    std::vector<std::unique_ptr<SavedTensors>> saved;
    std::vector<Copies> saved_leaving, saved_arriving;
    std::vector<char> moves_saved;  // the schedule offloads stage i's saved tensors
    torch::Tensor grad;  // the gradient flowing backward
    int grad_index = -1;
    explicit MicroState(int n)
        : x(n + 1), graph(n), leaf(n), on_host(n + 1), first_forward(n), offloading(n + 1), arriving(n + 1),
          saved(n), saved_leaving(n), saved_arriving(n), moves_saved(n, 0) {}
  };
  std::vector<MicroState> micro;
  for (int m = 0; m < micro_batches; ++m) micro.emplace_back(n);
  for (const Op& op : schedule.ops) {
    if (op.kind == OpKind::OffloadSaved && op.stage >= 0 && op.stage < n && op.micro >= 0 && op.micro < micro_batches) {
      micro[op.micro].moves_saved[op.stage] = 1;
    }
  }
  std::vector<MicroBatchInput> parts;
  if (micro_batches > 1) {
    parts = split_batch(batch, ctx, micro_batches, memory_);
    for (int m = 0; m < micro_batches; ++m) micro[m].x[0] = parts[m].input;
  } else {
    micro[0].x[0] = batch.input;
  }
  auto context = [&](int m) -> StepContext& { return micro_batches > 1 ? parts[m].ctx : ctx; };
  // Weights in host memory: copies of a stage's weights or gradients in
  // flight to the device, and of its gradients to the host.
  std::vector<Copies> weights_arriving(n), grads_arriving(n), grads_leaving(n);
  const Bytes batch_bytes = batch.bytes();

  ExecutionResult result;
  // Compute waits for `copy` to end; returns the wait.
  auto finish = [&](HostCopy& copy) -> Seconds {
    const Clock::time_point t0 = Clock::now();
    copy.wait();
    const Seconds waited = seconds_since(t0);
    result.stall_seconds += waited;
    if (copy.to_host()) result.to_host_stall_seconds += waited;
    result.transfer_seconds += copy.seconds();
    (copy.to_host() ? result.to_host_seconds : result.to_device_seconds) += copy.seconds();
    return waited;
  };
  auto finish_all = [&](Copies& copies) -> Seconds {
    Seconds waited = 0;
    for (auto& c : copies) waited += finish(*c);
    return waited;
  };
  // Compute waits until x_i's copy back, if any, has arrived.
  auto arrive = [&](MicroState& ms, int i) -> Seconds {
    if (!ms.arriving[i]) return 0;
    const Seconds waited = finish(*ms.arriving[i]);
    ms.arriving[i].reset();
    return waited;
  };
  // Bytes copied, by direction and by what moved (weights and gradients, or activations).
  enum class Direction { ToHost, ToDevice };
  enum class Kind { Activation, Weights };
  auto count_copy = [&](Bytes bytes, Direction direction, Kind kind) {
    result.swap_bytes += bytes;
    (direction == Direction::ToHost ? result.to_host_bytes : result.to_device_bytes) += bytes;
    if (kind == Kind::Weights) result.weight_swap_bytes += bytes;
  };
  auto bytes_of = [](const Copies& copies) {
    Bytes b = 0;
    for (const auto& c : copies) b += static_cast<Bytes>(c->destination().nbytes());
    return b;
  };
  auto check_not_offloading = [&](const Op& op, MicroState& ms, int i) {
    if (ms.offloading[i]) throw cannot_run(op, "x_" + std::to_string(i) + " is being offloaded; release it first");
  };
  auto input_of = [&](MicroState& ms, int i) -> torch::Tensor {
    if (ms.x[i].defined()) return ms.x[i];
    if (i > 0 && ms.graph[i - 1].defined()) return ms.graph[i - 1].detach();
    return {};
  };
  auto input_bytes = [&](int i, const torch::Tensor& in) {
    if (i > 0) return static_cast<Bytes>(in.nbytes());
    return micro_batches > 1 ? batch_bytes * in.size(0) / batch.input.size(0) : batch_bytes;
  };
  // Runs stage i forward; replays the generators when it ran before this step.
  auto forward = [&](MicroState& ms, StepContext& c, int i, const torch::Tensor& in) {
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
  };
  auto need_host_weights = [&](const Op& op) -> HostWeights& {
    if (!host_weights_) throw cannot_run(op, "the model's weights are on the device; weight operations need them in host memory");
    return *host_weights_;
  };
  auto transfers = [&]() -> HostTransfers& {
    if (!transfers_) transfers_ = memory_.make_transfers();
    return *transfers_;
  };
  // Compute on stage i: with weights in host memory they must have been
  // fetched and have arrived.
  auto weights_ready = [&](const Op& op, int i) -> Seconds {
    if (!host_weights_) return 0;
    if (!host_weights_->on_device(i)) throw cannot_run(op, "its weights are in host memory; fetch them first");
    const Seconds waited = finish_all(weights_arriving[i]);
    weights_arriving[i].clear();
    return waited;
  };

  result.ops.reserve(schedule.ops.size());
  memory_.reset_peak();
  const Clock::time_point start = Clock::now();
  for (const Op& op : schedule.ops) {
    OpRecord rec{op};
    memory_.synchronize();
    rec.live_before = memory_.live();
    memory_.reset_peak();
    const Clock::time_point t0 = Clock::now();
    const int i = op.stage;
    if (op.kind != OpKind::Loss && (i < 0 || i >= n)) throw cannot_run(op, "no such stage");
    if (op.micro < 0 || op.micro >= micro_batches) throw cannot_run(op, "no such micro-batch");
    MicroState& ms = micro[op.micro];
    StepContext& c = context(op.micro);
    switch (op.kind) {
      case OpKind::ForwardAll:
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone:
      case OpKind::Backward:
        rec.wait_seconds = arrive(ms, i) + weights_ready(op, i);
        break;
      case OpKind::Offload:
        rec.wait_seconds = arrive(ms, i);
        break;
      default:
        break;
    }
    switch (op.kind) {
      case OpKind::ForwardAll: {
        const torch::Tensor in = input_of(ms, i);
        if (!in.defined()) throw cannot_run(op, "its input is not held");
        if (ms.graph[i].defined()) throw cannot_run(op, "it already holds a forward with grad");
        const int variants = 1 + static_cast<int>(model_.stage(i).variant_names().size());
        if (op.variant < 0 || op.variant >= variants) {
          throw cannot_run(op, "variant " + std::to_string(op.variant) + " does not exist; stage '" +
                                   model_.stage_name(i) + "' has variants 0.." + std::to_string(variants - 1));
        }
        rec.input_bytes = input_bytes(i, in);
        torch::AutoGradMode grad_on(true);
        ms.leaf[i] = (i == 0 || !in.is_floating_point()) ? in : in.detach().requires_grad_(true);
        c.variant = op.variant;
        if (ms.moves_saved[i]) {
          ms.saved[i] = std::make_unique<SavedTensors>();
          SavedTensors::Capture capture(*ms.saved[i]);
          ms.graph[i] = forward(ms, c, i, ms.leaf[i]);
        } else {
          ms.graph[i] = forward(ms, c, i, ms.leaf[i]);
        }
        c.variant = 0;
        rec.output_bytes = static_cast<Bytes>(ms.graph[i].nbytes());
        break;
      }
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone: {
        const torch::Tensor in = input_of(ms, i);
        if (!in.defined()) throw cannot_run(op, "its input is not held");
        if (ms.on_host[i + 1].defined() || ms.offloading[i + 1]) {
          throw cannot_run(op, "its output x_" + std::to_string(i + 1) + " is offloaded; prefetch it instead");
        }
        if (op.kind == OpKind::ForwardNone) check_not_offloading(op, ms, i);
        rec.input_bytes = input_bytes(i, in);
        torch::NoGradGuard no_grad;
        ms.x[i + 1] = forward(ms, c, i, in);
        rec.output_bytes = static_cast<Bytes>(ms.x[i + 1].nbytes());
        if (op.kind == OpKind::ForwardNone && i > 0) ms.x[i] = torch::Tensor();
        break;
      }
      case OpKind::Loss: {
        if (!ms.graph[n - 1].defined()) throw cannot_run(op, "the loss stage has not run with grad");
        const double loss = ms.graph[n - 1].item<double>();
        ms.grad = torch::ones_like(ms.graph[n - 1]);
        if (micro_batches > 1) {
          result.loss += parts[op.micro].loss_weight * loss;
          ms.grad.mul_(parts[op.micro].loss_weight);
        } else {
          result.loss = loss;
        }
        ms.grad_index = n;
        break;
      }
      case OpKind::Backward: {
        if (!ms.graph[i].defined()) throw cannot_run(op, "it holds no forward with grad");
        if (ms.grad_index != i + 1) throw cannot_run(op, "the gradient reaching it is not its output's");
        check_not_offloading(op, ms, i);
        if (!grads_leaving[i].empty()) throw cannot_run(op, "its gradients are being offloaded");
        if (ms.saved[i] && ms.saved[i]->offloading()) throw cannot_run(op, "what its forward saved is being offloaded; release it first");
        if (ms.saved[i] && ms.saved[i]->on_host()) throw cannot_run(op, "what its forward saved is in host memory; prefetch it first");
        rec.wait_seconds += finish_all(grads_arriving[i]) + finish_all(ms.saved_arriving[i]);
        grads_arriving[i].clear();
        if (!ms.saved_arriving[i].empty()) ms.saved[i]->arrived();
        ms.saved_arriving[i].clear();
        if (ms.graph[i].requires_grad()) {
          // Start from the output's gradient edge and let the output go first:
          // unless a kernel saved it for the backward (ReLU does), its bytes
          // are free during the backward. The measured backward temporaries
          // then come out lower by them, so the memory model stays exact.
          const torch::autograd::Edge root = torch::autograd::impl::gradient_edge(ms.graph[i]);
          ms.graph[i] = torch::Tensor();
          torch::autograd::Engine::get_default_engine().execute({root}, {ms.grad}, /*keep_graph=*/false,
                                                                /*create_graph=*/false, /*accumulate_grad=*/true);
        }
        torch::Tensor next;
        if (ms.leaf[i].defined() && ms.leaf[i].requires_grad()) next = ms.leaf[i].grad();
        ms.graph[i] = torch::Tensor();
        ms.leaf[i] = torch::Tensor();
        ms.saved[i].reset();
        if (i > 0) ms.x[i] = torch::Tensor();
        ms.grad = next;
        ms.grad_index = i;
        break;
      }
      case OpKind::Offload: {
        if (i == 0) throw cannot_run(op, "x_0 is the batch; only activations x_1.. can be offloaded");
        if (!ms.x[i].defined()) throw cannot_run(op, "x_" + std::to_string(i) + " is not held on its own");
        if (ms.offloading[i]) throw cannot_run(op, "x_" + std::to_string(i) + " is already being offloaded");
        ms.offloading[i] = transfers().to_host(ms.x[i]);
        rec.input_bytes = static_cast<Bytes>(ms.x[i].nbytes());
        count_copy(rec.input_bytes, Direction::ToHost, Kind::Activation);
        break;
      }
      case OpKind::Release: {
        if (!ms.offloading[i]) throw cannot_run(op, "x_" + std::to_string(i) + " has no offload in progress");
        rec.wait_seconds = finish(*ms.offloading[i]);
        ms.on_host[i] = ms.offloading[i]->destination();
        ms.offloading[i].reset();
        ms.x[i] = torch::Tensor();
        break;
      }
      case OpKind::Prefetch: {
        if (!ms.on_host[i].defined()) throw cannot_run(op, "x_" + std::to_string(i) + " is not in host memory");
        ms.arriving[i] = transfers().to_device(ms.on_host[i]);
        ms.x[i] = ms.arriving[i]->destination();
        ms.on_host[i] = torch::Tensor();
        rec.output_bytes = static_cast<Bytes>(ms.x[i].nbytes());
        count_copy(rec.output_bytes, Direction::ToDevice, Kind::Activation);
        break;
      }
      case OpKind::OffloadSaved: {
        if (!ms.graph[i].defined()) throw cannot_run(op, "it holds no forward with grad");
        if (!ms.saved[i]) throw cannot_run(op, "its forward with grad ran before the schedule named it for offload");
        if (ms.saved[i]->offloading() || ms.saved[i]->on_host()) throw cannot_run(op, "what its forward saved is already offloaded");
        rec.wait_seconds = finish_all(ms.saved_arriving[i]);  // a copy cannot leave before it arrived
        if (!ms.saved_arriving[i].empty()) ms.saved[i]->arrived();
        ms.saved_arriving[i].clear();
        ms.saved_leaving[i] = ms.saved[i]->offload(transfers());
        rec.input_bytes = bytes_of(ms.saved_leaving[i]);
        count_copy(rec.input_bytes, Direction::ToHost, Kind::Activation);
        break;
      }
      case OpKind::ReleaseSaved: {
        if (!ms.saved[i] || !ms.saved[i]->offloading()) throw cannot_run(op, "what its forward saved has no offload in progress");
        rec.wait_seconds = finish_all(ms.saved_leaving[i]);
        ms.saved[i]->release(ms.saved_leaving[i]);
        ms.saved_leaving[i].clear();
        break;
      }
      case OpKind::PrefetchSaved: {
        if (!ms.saved[i] || !ms.saved[i]->on_host()) throw cannot_run(op, "what its forward saved is not in host memory");
        ms.saved_arriving[i] = ms.saved[i]->prefetch(transfers());
        rec.output_bytes = bytes_of(ms.saved_arriving[i]);
        count_copy(rec.output_bytes, Direction::ToDevice, Kind::Activation);
        break;
      }
      case OpKind::FetchWeights: {
        HostWeights& hw = need_host_weights(op);
        if (hw.on_device(i)) throw cannot_run(op, "its weights are already on the device");
        weights_arriving[i] = hw.fetch(i, transfers());
        rec.output_bytes = bytes_of(weights_arriving[i]);
        count_copy(rec.output_bytes, Direction::ToDevice, Kind::Weights);
        break;
      }
      case OpKind::DropWeights: {
        HostWeights& hw = need_host_weights(op);
        if (!hw.on_device(i)) throw cannot_run(op, "its weights are not on the device");
        for (const MicroState& other : micro) {
          if (other.graph[i].defined()) throw cannot_run(op, "a forward with grad of the stage still needs its weights");
        }
        rec.wait_seconds = finish_all(weights_arriving[i]) + finish_all(grads_leaving[i]);
        weights_arriving[i].clear();
        if (!grads_leaving[i].empty()) hw.grads_arrived(i, grads_leaving[i]);
        grads_leaving[i].clear();
        hw.drop(i);
        break;
      }
      case OpKind::OffloadGrads: {
        HostWeights& hw = need_host_weights(op);
        if (!hw.on_device(i)) throw cannot_run(op, "its weights, and so its gradients, are not on the device");
        rec.wait_seconds = finish_all(grads_arriving[i]);
        grads_arriving[i].clear();
        grads_leaving[i] = hw.offload_grads(i, transfers());
        rec.input_bytes = bytes_of(grads_leaving[i]);
        count_copy(rec.input_bytes, Direction::ToHost, Kind::Weights);
        break;
      }
      case OpKind::FetchGrads: {
        HostWeights& hw = need_host_weights(op);
        if (!grads_leaving[i].empty()) throw cannot_run(op, "its gradients are still on their way to the host");
        grads_arriving[i] = hw.fetch_grads(i, transfers());
        rec.output_bytes = bytes_of(grads_arriving[i]);
        count_copy(rec.output_bytes, Direction::ToDevice, Kind::Weights);
        break;
      }
      case OpKind::Update: {
        HostWeights& hw = need_host_weights(op);
        rec.wait_seconds = finish_all(grads_leaving[i]);
        if (!grads_leaving[i].empty()) hw.grads_arrived(i, grads_leaving[i]);
        grads_leaving[i].clear();
        hw.update(i);
        break;
      }
    }
    memory_.synchronize();
    rec.seconds = seconds_since(t0);
    rec.peak = std::max(memory_.peak(), rec.live_before);
    rec.live_after = memory_.live();
    result.peak = std::max(result.peak, rec.peak);
    result.ops.push_back(rec);
  }
  for (int m = 0; m < micro_batches; ++m) {
    const std::string which = micro_batches > 1 ? " of micro-batch " + std::to_string(m) : "";
    if (micro[m].grad_index != 0) throw Error("executor: the schedule ended before the backward of stage 0" + which);
    for (int i = 0; i <= n; ++i) {
      if (micro[m].on_host[i].defined() || micro[m].offloading[i]) {
        throw Error("executor: the schedule ended with x_" + std::to_string(i) + which + " offloaded and never prefetched");
      }
    }
    if (micro_batches > 1) {
      ctx.correct += parts[m].ctx.correct;
      ctx.counted += parts[m].ctx.counted;
    }
  }
  if (host_weights_) {
    // The step ends when the host's updates have (the Simulator's host timeline).
    host_weights_->wait_for_updates();
    for (int i = 0; i < n; ++i) {
      if (host_weights_->on_device(i)) {
        throw Error("executor: the schedule ended with the weights of stage " + std::to_string(i) + " on the device");
      }
    }
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace memtrain::runtime
