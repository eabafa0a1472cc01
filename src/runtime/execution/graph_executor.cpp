#include "runtime/execution/graph_executor.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"

namespace memtrain::runtime {

GraphExecutor::GraphExecutor(GraphModel& model, DeviceMemory& memory)
    : model_(model), memory_(memory), training_(with_backward(model.structure())) {}

GraphExecution GraphExecutor::run(const plan::GraphSchedule& schedule, const Batch& batch, StepContext& ctx) {
  using Clock = std::chrono::steady_clock;
  const int n = model_.size();
  const int total = training_.size();
  if (static_cast<int>(schedule.compute.size()) != total || static_cast<int>(schedule.keep.size()) != total) {
    throw Error("graph executor: the schedule has " + std::to_string(schedule.compute.size()) +
                " stages; the training graph of '" + model_.name() + "' has " + std::to_string(total) + " nodes");
  }
  for (int k = 0; k < total; ++k) {
    if (schedule.variant_of(k) != 0) {
      throw Error("graph executor: the schedule runs node " + std::to_string(k) + " ('" + training_.nodes[k].name +
                  "') as variant " + std::to_string(schedule.variant_of(k)) + "; the nodes of '" + model_.name() +
                  "' have no variants");
    }
  }
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    for (int j : model_.node(i).inputs) consumers[j].push_back(i);
  }
  auto backward_of = [n](int i) { return 2 * n - 1 - i; };
  auto reads = [&](int k, int i) {
    const auto& in = training_.nodes[k].inputs;
    return std::find(in.begin(), in.end(), i) != in.end();
  };
  // out[k]: a forward node's output; a backward node's gradients, one per input of its forward node.
  std::vector<std::vector<torch::Tensor>> out(total);
  std::vector<char> computed(total, 0), weights_done(n, 0);
  GraphExecution result;
  const Clock::time_point start = Clock::now();

  auto forward_node = [&](int i) {
    if (i == 0) return std::vector<torch::Tensor>{batch.input};
    std::vector<torch::Tensor> inputs;
    for (int j : model_.node(i).inputs) inputs.push_back(out[j][0]);
    torch::NoGradGuard no_grad;
    torch::Tensor y = model_.node(i).module->forward(inputs, ctx);
    if (i == n - 1 && !computed[i]) result.loss = y.item<double>();
    return std::vector<torch::Tensor>{y};
  };
  auto backward_node = [&](int i) {
    const auto& node = model_.node(i);
    std::vector<torch::Tensor> grads(node.inputs.size());
    if (i == 0) return grads;
    torch::Tensor gy;
    if (i == n - 1) {
      gy = torch::ones({}, batch.input.options().dtype(torch::kFloat));
    } else {
      for (int c : consumers[i]) {
        const auto& in = model_.node(c).inputs;
        const size_t p = std::find(in.begin(), in.end(), i) - in.begin();
        const torch::Tensor& g = out[backward_of(c)][p];
        gy = gy.defined() ? gy + g : g;
      }
    }
    std::vector<torch::Tensor> inputs;
    std::vector<bool> wanted;
    for (int j : node.inputs) {
      inputs.push_back(out[j][0]);
      wanted.push_back(j != 0 && out[j][0].is_floating_point());
    }
    grads = node.module->backward(inputs, out[i][0], gy, wanted, !weights_done[i], ctx);
    weights_done[i] = 1;
    return grads;
  };

  for (int t = 0; t < total; ++t) {
    const auto& compute = schedule.compute[t];
    if (static_cast<int>(compute.size()) != total || static_cast<int>(schedule.keep[t].size()) != total) {
      throw Error("graph executor: stage " + std::to_string(t) + " of the schedule does not name every node");
    }
    if (!compute[t]) throw Error("graph executor: stage " + std::to_string(t) + " does not compute its own node");
    auto kept_next = [&](int i) { return t + 1 < total && schedule.keep[t + 1][i]; };
    // Entering the stage: only what it keeps.
    for (int i = 0; i < total; ++i) {
      if (!out[i].empty() && !(i < t && schedule.keep[t][i])) out[i].clear();
    }
    for (int k = 0; k <= t; ++k) {
      if (!compute[k]) continue;
      for (int j : training_.nodes[k].inputs) {
        if (out[j].empty()) {
          throw Error("graph executor: stage " + std::to_string(t) + ", node " + std::to_string(k) + " ('" +
                      training_.nodes[k].name + "'): input " + std::to_string(j) + " ('" + training_.nodes[j].name +
                      "') is neither kept nor computed in this stage");
        }
      }
      GraphOpRecord rec;
      rec.stage = t;
      rec.node = k;
      rec.recomputed = computed[k];
      memory_.synchronize();
      rec.live_before = memory_.live();
      memory_.reset_peak();
      const Clock::time_point t0 = Clock::now();
      out[k] = k < n ? forward_node(k) : backward_node(2 * n - 1 - k);
      memory_.synchronize();
      rec.seconds = seconds_since(t0);
      rec.peak = std::max(memory_.peak(), rec.live_before);
      for (const torch::Tensor& x : out[k]) {
        if (x.defined() && !(k == 0)) rec.output_bytes += static_cast<Bytes>(x.nbytes());
      }
      // The input and its backward cost nothing: the planner recomputes them freely.
      if (k != 0 && k != total - 1) result.recomputed += computed[k];
      computed[k] = 1;
      result.peak = std::max(result.peak, rec.peak);
      result.ops.push_back(rec);
      // Drop what nothing later in the stage reads and the next stage does not keep.
      for (int i = 0; i <= t; ++i) {
        if (out[i].empty() || kept_next(i)) continue;
        bool needed = false;
        for (int j = k + 1; j <= t && !needed; ++j) needed = compute[j] && reads(j, i);
        if (!needed) out[i].clear();
      }
    }
  }
  result.seconds = seconds_since(start);
  return result;
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
