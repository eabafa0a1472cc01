#include "predict/rank_scaling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memtrain::predict {

RankStep predict_rank_step(const ThroughputModel& model, const RankMachine& machine, Bytes gradient_bytes,
                           std::int64_t gradient_tensors, std::int64_t batch) {
  RankStep s;
  s.batch = batch;
  s.compute = model.step_seconds(static_cast<double>(batch)) * machine.compute_slowdown;
  s.communication = machine.ranks > 1 ? machine.all_reduce.seconds(static_cast<double>(gradient_bytes),
                                                                   static_cast<double>(gradient_tensors)) +
                                            machine.sync_seconds
                                      : 0;
  s.step = s.compute + s.communication;
  s.throughput = s.step > 0 ? static_cast<double>(machine.ranks * batch) / s.step : 0;
  return s;
}

RankStep best_rank_step(const ThroughputModel& model, const RankMachine& machine, Bytes gradient_bytes,
                        std::int64_t gradient_tensors, std::int64_t max_batch) {
  if (max_batch < 1) throw Error("rank scaling: no batch fits (max batch " + std::to_string(max_batch) + ")");
  RankStep best;
  // Every batch up to 4096, then a geometric grid: the step time is a hinge,
  // so the throughput has no narrow peak the grid could miss.
  std::int64_t b = 1;
  while (b <= max_batch) {
    const RankStep s = predict_rank_step(model, machine, gradient_bytes, gradient_tensors, b);
    if (s.throughput > best.throughput) best = s;
    if (b == max_batch) break;
    b = b < 4096 ? b + 1 : std::min(max_batch, b + b / 64);
    if (b > max_batch) b = max_batch;
  }
  if (best.batch == 0) best = predict_rank_step(model, machine, gradient_bytes, gradient_tensors, max_batch);
  return best;
}

}  // namespace memtrain::predict
