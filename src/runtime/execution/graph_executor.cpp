#include "runtime/execution/graph_executor.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

#include "core/error.h"
#include "core/graph_schedule_interpreter.h"
#include "core/seconds_since.h"
#include "runtime/memory/operation_times.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// The graph executor's backend: runs each node with LibTorch, measures it,
// and drops outputs when the interpreter releases them.
class LibTorchGraphBackend : public GraphScheduleBackend {
 public:
  LibTorchGraphBackend(GraphModel& model, DeviceMemory& memory, const Graph& training, const Batch& batch,
                       StepContext& ctx)
      : model_(model), memory_(memory), training_(training), batch_(batch), ctx_(ctx), n_(model.size()),
        out_(training.size()), weights_done_(n_, 0), consumers_(n_) {
    for (int i = 0; i < n_; ++i) {
      for (int j : model_.node(i).inputs) consumers_[j].push_back(i);
    }
  }

  void compute(int t, int k, int, bool recomputed, const std::vector<char>&) override {
    GraphOpRecord rec;
    rec.stage = t;
    rec.node = k;
    rec.recomputed = recomputed;
    // No wait for the device: the allocator's counts are the host's, and the
    // node's time is read between marks in the device's queue by settle().
    rec.live_before = memory_.live();
    memory_.reset_peak();
    times_.start();
    out_[k] = k < n_ ? forward_node(k, recomputed) : backward_node(2 * n_ - 1 - k);
    times_.stop();
    rec.peak = std::max(memory_.peak(), rec.live_before);
    for (const torch::Tensor& x : out_[k]) {
      if (x.defined() && k != 0) rec.output_bytes += static_cast<Bytes>(x.nbytes());
    }
    // The input and its backward cost nothing: the planner recomputes them freely.
    if (k != 0 && k != training_.size() - 1) result.recomputed += recomputed;
    result.peak = std::max(result.peak, rec.peak);
    result.ops.push_back(rec);
  }
  void release(int i) override { out_[i].clear(); }

  // Waits for the device once: the nodes' times, the loss and its counts.
  void settle() {
    const std::vector<Seconds> seconds = times_.settle();
    for (size_t k = 0; k < seconds.size(); ++k) result.ops[k].seconds = seconds[k];
    if (loss_.defined()) result.loss = loss_.item<double>();
    loss_ = torch::Tensor();
    ctx_.settle_counts();
  }

  GraphExecution result;

 private:
  int backward_of(int i) const { return 2 * n_ - 1 - i; }

  std::vector<torch::Tensor> forward_node(int i, bool recomputed) {
    if (i == 0) return {batch_.input};
    std::vector<torch::Tensor> inputs;
    for (int j : model_.node(i).inputs) inputs.push_back(out_[j][0]);
    torch::NoGradGuard no_grad;
    torch::Tensor y = model_.node(i).module->forward(inputs, ctx_);
    if (i == n_ - 1 && !recomputed) {
      if (y.is_cpu()) {
        result.loss = y.item<double>();
      } else {
        loss_ = y;  // read by settle(): reading it now would wait for the device
      }
    }
    return {y};
  }
  // A backward node's outputs: the gradients of its forward node's inputs, one each.
  std::vector<torch::Tensor> backward_node(int i) {
    const auto& node = model_.node(i);
    std::vector<torch::Tensor> grads(node.inputs.size());
    if (i == 0) return grads;
    torch::Tensor gy;
    if (i == n_ - 1) {
      gy = torch::ones({}, batch_.input.options().dtype(torch::kFloat));
    } else {
      for (int c : consumers_[i]) {
        const auto& in = model_.node(c).inputs;
        const size_t p = std::find(in.begin(), in.end(), i) - in.begin();
        const torch::Tensor& g = out_[backward_of(c)][p];
        gy = gy.defined() ? gy + g : g;
      }
    }
    std::vector<torch::Tensor> inputs;
    std::vector<bool> wanted;
    for (int j : node.inputs) {
      inputs.push_back(out_[j][0]);
      wanted.push_back(j != 0 && out_[j][0].is_floating_point());
    }
    grads = node.module->backward(inputs, out_[i][0], gy, wanted, !weights_done_[i], ctx_);
    weights_done_[i] = 1;
    return grads;
  }

  GraphModel& model_;
  DeviceMemory& memory_;
  const Graph& training_;
  const Batch& batch_;
  StepContext& ctx_;
  const int n_;                                  // forward nodes
  std::vector<std::vector<torch::Tensor>> out_;  // per training node: its output(s) while held
  std::vector<char> weights_done_;               // a node's weight gradients accumulated once
  std::vector<std::vector<int>> consumers_;      // forward nodes reading each forward node
  OperationTimes times_{memory_};                // the nodes' device times, until settle() reads them
  torch::Tensor loss_;                           // a device's loss, until settle()
};

}  // namespace

GraphExecutor::GraphExecutor(GraphModel& model, DeviceMemory& memory)
    : model_(model), memory_(memory), training_(with_backward(model.structure())) {}

GraphExecution GraphExecutor::run(const plan::GraphSchedule& schedule, const Batch& batch, StepContext& ctx) {
  LibTorchGraphBackend backend(model_, memory_, training_, batch, ctx);
  const Clock::time_point start = Clock::now();
  interpret_graph_schedule(training_, schedule, backend);
  backend.settle();
  backend.result.seconds = seconds_since(start);
  return std::move(backend.result);
}

Graph measure_training_graph(GraphModel& model, DeviceMemory& memory, const Batch& batch, StepContext& ctx) {
  GraphExecutor executor(model, memory);
  const plan::GraphSchedule keep = plan::keeping_everything(executor.training_structure());
  // Weight gradients are resident all step: in place before the measured steps.
  for (torch::Tensor p : model.parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  }
  executor.run(keep, batch, ctx);  // warm-up: first calls allocate and choose kernels
  memory.synchronize();
  const Bytes resident = memory.live();
  const GraphExecution r = executor.run(keep, batch, ctx);
  for (torch::Tensor p : model.parameters()) p.mutable_grad().zero_();
  Graph g = executor.training_structure();
  g.persistent_bytes = resident;
  for (const GraphOpRecord& rec : r.ops) {
    GraphNode& node = g.nodes[rec.node];
    node.time = rec.node == 0 ? 0 : rec.seconds;
    node.output_bytes = rec.output_bytes;
    node.temp_bytes = std::max<Bytes>(0, rec.peak - rec.live_before - rec.output_bytes);
  }
  return g;
}

}  // namespace memtrain::runtime
