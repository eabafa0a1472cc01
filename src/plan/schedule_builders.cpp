#include "plan/schedule_builders.h"

#include <algorithm>

#include "core/error.h"
#include "core/units.h"
#include "sim/simulator.h"

namespace memtrain::plan {

Schedule schedule_with_recompute(const std::vector<char>& recompute) {
  const int n = static_cast<int>(recompute.size());
  Schedule s;
  s.ops.reserve(3 * n + 1);
  for (int i = 0; i < n; ++i) {
    if (recompute[i] && i < n - 1)
      s.forward_checkpoint(i);
    else
      s.forward_all(i);
  }
  s.loss();
  for (int i = n - 1; i >= 0; --i) {
    if (recompute[i] && i < n - 1) s.forward_all(i);
    s.backward(i);
  }
  return s;
}

Schedule recomputing_stage(const Schedule& local, int stage) {
  MEMTRAIN_ASSERT(local.recomputes_locally(), "only a schedule that recomputes locally recomputes a stage alone");
  const auto of_stage = [&](OpKind kind) {
    return [=](const Op& op) { return op.kind == kind && op.stage == stage && op.micro == 0; };
  };
  const auto forward = std::find_if(local.ops.begin(), local.ops.end(), of_stage(OpKind::ForwardAll));
  const auto backward = std::find_if(local.ops.begin(), local.ops.end(), of_stage(OpKind::Backward));
  const bool once = std::count_if(local.ops.begin(), local.ops.end(),
                                  [&](const Op& op) { return op.stage == stage && is_forward(op.kind); }) == 1;
  const bool last = std::none_of(local.ops.begin(), local.ops.end(),
                                 [&](const Op& op) { return op.kind != OpKind::Loss && op.stage > stage; });
  MEMTRAIN_ASSERT(forward != local.ops.end() && backward != local.ops.end() && forward < backward && once && !last,
                  "the recomputed stage runs once with grad before its backward, and is not the last");
  Schedule s;
  s.ops.assign(local.ops.begin(), forward);
  s.forward_checkpoint(stage);
  s.ops.insert(s.ops.end(), forward + 1, backward);
  s.forward_all(stage, forward->variant);
  s.ops.insert(s.ops.end(), backward, local.ops.end());
  return s;
}

Schedule schedule_keeping_everything(int stages) { return schedule_with_recompute(std::vector<char>(stages, 0)); }

Bytes keep_everything_peak(const Chain& chain) {
  Chain on_device = chain;  // weights in host memory would need fetches the schedule does not make
  on_device.weights_on_host = on_device.updates_inline = false;
  return sim::simulate(on_device, schedule_keeping_everything(chain.size())).peak_bytes;
}

Schedule schedule_keeping_everything(int stages, int micro_batches) {
  Schedule s;
  for (int m = 0; m < micro_batches; ++m) {
    for (int i = 0; i < stages; ++i) s.forward_all(i, 0, m);
    s.loss(m);
    for (int i = stages - 1; i >= 0; --i) s.backward(i, m);
  }
  return s;
}

Schedule schedule_checkpointing_everything(int stages) { return schedule_with_recompute(std::vector<char>(stages, 1)); }

Schedule schedule_for_collection(int stages, const std::vector<int>& variants) {
  auto variant = [&](int i) { return i < static_cast<int>(variants.size()) ? variants[i] : 0; };
  Schedule s;
  for (int i = 0; i < stages; ++i) s.forward_checkpoint(i);
  s.forward_all(stages - 1, variant(stages - 1));
  s.loss();
  for (int i = stages - 1; i >= 0; --i) {
    if (i < stages - 1) s.forward_all(i, variant(i));
    s.backward(i);
  }
  return s;
}

Schedule schedule_with_segments(int stages, const std::vector<int>& starts) {
  MEMTRAIN_ASSERT(!starts.empty() && starts[0] == 0, "segments start at stage 0");
  const int segments = static_cast<int>(starts.size());
  auto end_of = [&](int k) { return k + 1 < segments ? starts[k + 1] : stages; };
  Schedule s;
  for (int k = 0; k < segments; ++k) {
    const bool last = k == segments - 1;
    for (int i = starts[k]; i < end_of(k); ++i) {
      if (last)
        s.forward_all(i);
      else if (i == starts[k])
        s.forward_checkpoint(i);
      else
        s.forward_none(i);
    }
  }
  s.loss();
  for (int k = segments - 1; k >= 0; --k) {
    if (k != segments - 1) {
      for (int i = starts[k]; i < end_of(k); ++i) s.forward_all(i);
    }
    for (int i = end_of(k) - 1; i >= starts[k]; --i) s.backward(i);
  }
  return s;
}

Plan priced_plan(const std::string& planner, const Chain& chain, Schedule schedule, Bytes budget, Bytes least_budget) {
  const sim::SimResult r = sim::simulate(chain, schedule);
  Plan p;
  p.planner = planner;
  p.peak_bytes = r.peak_bytes;
  p.time = r.time;
  p.feasible = r.peak_bytes <= budget;
  p.schedule = std::move(schedule);
  if (!p.feasible) {
    if (least_budget < 0) least_budget = r.peak_bytes;
    p.min_budget_bytes = least_budget;
    p.note = "infeasible, minimum needed is " + std::to_string(least_budget) + " bytes (" + format_bytes(least_budget) +
             "), budget is " + std::to_string(budget) + " bytes";
  }
  return p;
}

}  // namespace memtrain::plan
