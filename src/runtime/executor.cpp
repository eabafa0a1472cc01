#include "runtime/executor.h"

#include <chrono>
#include <optional>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/rng_snapshot.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

Error cannot_run(const Op& op, const std::string& why) {
  const std::string stage = op.kind == OpKind::Loss ? "" : " " + std::to_string(op.stage);
  return Error(std::string("executor: ") + op_kind_name(op.kind) + stage + ": " + why);
}

}  // namespace

ExecutionResult Executor::run(const Schedule& schedule, const Batch& batch, StepContext& ctx) {
  try {
    return run_unchecked(schedule, batch, ctx);
  } catch (const OutOfBudget&) {
    throw;
  } catch (const std::exception& e) {
    if (!memory_.is_out_of_budget(e)) throw;
    throw OutOfBudget(memory_.describe(), 0, memory_.live(), memory_.budget());
  }
}

ExecutionResult Executor::run_unchecked(const Schedule& schedule, const Batch& batch, StepContext& ctx) {
  const int n = model_.size();
  // x[i]: a_i held on its own; graph[i]: the output of stage i's forward
  // with grad (its x̄_i); leaf[i]: that forward's input.
  std::vector<torch::Tensor> x(n + 1), graph(n), leaf(n);
  std::vector<std::optional<RngSnapshot>> first_forward(n);
  // offloading[i]: x_i's copy to host, until Release; arriving[i]: its copy
  // back, until the first op that reads it; on_host[i]: x_i in host memory.
  std::vector<std::unique_ptr<HostCopy>> offloading(n + 1), arriving(n + 1);
  std::vector<torch::Tensor> on_host(n + 1);
  torch::Tensor grad;  // the gradient flowing backward
  int grad_index = -1;
  x[0] = batch.input;
  const Bytes batch_bytes = batch.bytes();

  ExecutionResult result;
  // Compute waits for `copy` to end; returns the wait.
  auto finish = [&](HostCopy& copy) -> Seconds {
    const Clock::time_point t0 = Clock::now();
    copy.wait();
    const Seconds waited = std::chrono::duration<double>(Clock::now() - t0).count();
    result.stall_seconds += waited;
    result.transfer_seconds += copy.seconds();
    return waited;
  };
  // Compute waits until x_i's copy back, if any, has arrived.
  auto arrive = [&](int i) -> Seconds {
    if (!arriving[i]) return 0;
    const Seconds waited = finish(*arriving[i]);
    arriving[i].reset();
    return waited;
  };
  auto check_not_offloading = [&](const Op& op, int i) {
    if (offloading[i]) throw cannot_run(op, "x_" + std::to_string(i) + " is being offloaded; release it first");
  };
  auto input_of = [&](int i) -> torch::Tensor {
    if (x[i].defined()) return x[i];
    if (i > 0 && graph[i - 1].defined()) return graph[i - 1].detach();
    return {};
  };
  auto input_bytes = [&](int i, const torch::Tensor& in) {
    return i == 0 ? batch_bytes : static_cast<Bytes>(in.nbytes());
  };
  // Runs stage i forward; replays the generators when it ran before this step.
  auto forward = [&](int i, const torch::Tensor& in) {
    std::optional<RngSnapshot> resume;
    if (first_forward[i]) {
      resume = RngSnapshot::capture(ctx.generator);
      first_forward[i]->restore(ctx.generator);
    } else {
      first_forward[i] = RngSnapshot::capture(ctx.generator);
    }
    const bool update_buffers = ctx.update_buffers;
    ctx.update_buffers = update_buffers && !resume;
    torch::Tensor out = model_.stage(i).forward(in, ctx);
    ctx.update_buffers = update_buffers;
    if (resume) resume->restore(ctx.generator);
    return out;
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
    if (op.kind != OpKind::Loss && op.kind != OpKind::Release && op.kind != OpKind::Prefetch) {
      rec.wait_seconds = arrive(i);
    }
    switch (op.kind) {
      case OpKind::ForwardAll: {
        const torch::Tensor in = input_of(i);
        if (!in.defined()) throw cannot_run(op, "its input is not held");
        if (graph[i].defined()) throw cannot_run(op, "it already holds a forward with grad");
        const int variants = 1 + static_cast<int>(model_.stage(i).variant_names().size());
        if (op.variant < 0 || op.variant >= variants) {
          throw cannot_run(op, "variant " + std::to_string(op.variant) + " does not exist; stage '" +
                                   model_.stage_name(i) + "' has variants 0.." + std::to_string(variants - 1));
        }
        rec.input_bytes = input_bytes(i, in);
        torch::AutoGradMode grad_on(true);
        leaf[i] = (i == 0 || !in.is_floating_point()) ? in : in.detach().requires_grad_(true);
        ctx.variant = op.variant;
        graph[i] = forward(i, leaf[i]);
        ctx.variant = 0;
        rec.output_bytes = static_cast<Bytes>(graph[i].nbytes());
        break;
      }
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone: {
        const torch::Tensor in = input_of(i);
        if (!in.defined()) throw cannot_run(op, "its input is not held");
        if (on_host[i + 1].defined() || offloading[i + 1]) {
          throw cannot_run(op, "its output x_" + std::to_string(i + 1) + " is offloaded; prefetch it instead");
        }
        if (op.kind == OpKind::ForwardNone) check_not_offloading(op, i);
        rec.input_bytes = input_bytes(i, in);
        torch::NoGradGuard no_grad;
        x[i + 1] = forward(i, in);
        rec.output_bytes = static_cast<Bytes>(x[i + 1].nbytes());
        if (op.kind == OpKind::ForwardNone && i > 0) x[i] = torch::Tensor();
        break;
      }
      case OpKind::Loss: {
        if (!graph[n - 1].defined()) throw cannot_run(op, "the loss stage has not run with grad");
        result.loss = graph[n - 1].item<double>();
        grad = torch::ones_like(graph[n - 1]);
        grad_index = n;
        break;
      }
      case OpKind::Backward: {
        if (!graph[i].defined()) throw cannot_run(op, "it holds no forward with grad");
        if (grad_index != i + 1) throw cannot_run(op, "the gradient reaching it is not its output's");
        check_not_offloading(op, i);
        if (graph[i].requires_grad()) torch::autograd::backward({graph[i]}, {grad});
        torch::Tensor next;
        if (leaf[i].defined() && leaf[i].requires_grad()) next = leaf[i].grad();
        graph[i] = torch::Tensor();
        leaf[i] = torch::Tensor();
        if (i > 0) x[i] = torch::Tensor();
        grad = next;
        grad_index = i;
        break;
      }
      case OpKind::Offload: {
        if (i == 0) throw cannot_run(op, "x_0 is the batch; only activations x_1.. can be offloaded");
        if (!x[i].defined()) throw cannot_run(op, "x_" + std::to_string(i) + " is not held on its own");
        if (offloading[i]) throw cannot_run(op, "x_" + std::to_string(i) + " is already being offloaded");
        if (!transfers_) transfers_ = memory_.make_transfers();
        offloading[i] = transfers_->to_host(x[i]);
        rec.input_bytes = static_cast<Bytes>(x[i].nbytes());
        result.swap_bytes += rec.input_bytes;
        break;
      }
      case OpKind::Release: {
        if (!offloading[i]) throw cannot_run(op, "x_" + std::to_string(i) + " has no offload in progress");
        rec.wait_seconds = finish(*offloading[i]);
        on_host[i] = offloading[i]->destination();
        offloading[i].reset();
        x[i] = torch::Tensor();
        break;
      }
      case OpKind::Prefetch: {
        if (!on_host[i].defined()) throw cannot_run(op, "x_" + std::to_string(i) + " is not in host memory");
        arriving[i] = transfers_->to_device(on_host[i]);
        x[i] = arriving[i]->destination();
        on_host[i] = torch::Tensor();
        rec.output_bytes = static_cast<Bytes>(x[i].nbytes());
        result.swap_bytes += rec.output_bytes;
        break;
      }
    }
    memory_.synchronize();
    rec.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    rec.peak = std::max(memory_.peak(), rec.live_before);
    rec.live_after = memory_.live();
    result.peak = std::max(result.peak, rec.peak);
    result.ops.push_back(rec);
  }
  if (grad_index != 0) throw Error("executor: the schedule ended before the backward of stage 0");
  for (int i = 0; i <= n; ++i) {
    if (on_host[i].defined() || offloading[i]) {
      throw Error("executor: the schedule ended with x_" + std::to_string(i) + " offloaded and never prefetched");
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace memtrain::runtime
