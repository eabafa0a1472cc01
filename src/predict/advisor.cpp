#include "predict/advisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace memtrain::predict {

namespace {

// The largest b in 1..limit with alpha·b + beta <= usable; 0 when none.
std::int64_t largest_fitting_batch(const ThroughputModel& m, Bytes usable, std::int64_t limit) {
  if (m.memory_floor > static_cast<double>(usable)) return 0;
  const double room = static_cast<double>(usable) - m.beta;
  if (m.alpha <= 0) return m.peak_bytes(1) <= static_cast<double>(usable) ? limit : 0;
  const double b = std::floor(room / m.alpha);
  if (b < 1) return 0;
  std::int64_t batch = static_cast<std::int64_t>(std::min(b, static_cast<double>(limit)));
  // Guard the floor against rounding: step down until the prediction fits.
  while (batch > 0 && m.peak_bytes(static_cast<double>(batch)) > static_cast<double>(usable)) --batch;
  return batch;
}

// The batch in 1..max_batch with the highest predicted throughput; the larger
// one on a tie. T(b) rises to the knee, then rises or falls monotonically.
std::int64_t best_batch(const ThroughputModel& m, std::int64_t max_batch) {
  std::int64_t best = max_batch;
  const double knee = m.saturation_batch();
  for (double candidate : {1.0, std::floor(knee), std::ceil(knee)}) {
    if (!(candidate >= 1 && candidate < static_cast<double>(max_batch))) continue;
    if (m.throughput(candidate) > m.throughput(static_cast<double>(best))) best = static_cast<std::int64_t>(candidate);
  }
  return best;
}

// Why a method's throughput stops growing with its batch, as a clause.
std::string limit_phrase(const MethodAdvice& m) {
  if (m.best_batch < m.max_batch) return m.method + "'s throughput peaks at batch " + std::to_string(m.best_batch);
  const double s = m.model.saturation_batch();
  if (!std::isfinite(s)) return m.method + "'s step time does not grow with the batch in the measurements";
  if (s < static_cast<double>(m.model.min_batch)) {
    return m.method + " saturates the device already at its smallest measured batch (" +
           std::to_string(m.model.min_batch) + ")";
  }
  return m.method + " saturates the device from batch " + format_number("%.0f", s);
}

std::string reason_for(const Advice& advice, const MethodAdvice& best) {
  const MethodAdvice* other = nullptr;  // the runner-up by throughput
  for (const MethodAdvice& m : advice.methods) {
    if (&m == &best) continue;
    if (!other || m.predicted_throughput > other->predicted_throughput) other = &m;
  }
  const std::string device = format_bytes(advice.usable_bytes);
  if (!other)
    return "it is the only method measured; its best batch is " + std::to_string(best.best_batch) + " in " + device;
  if (other->max_batch == 0) {
    return other->method + " does not fit even batch 1 in " + device + "; " + best.method + " fits batch " +
           std::to_string(best.max_batch);
  }
  const double gain = best.predicted_throughput / other->predicted_throughput - 1;
  auto growth = [](const MethodAdvice& from, const MethodAdvice& to) {
    return format_number("%.1f", static_cast<double>(to.max_batch) / static_cast<double>(from.max_batch)) + "x (" +
           std::to_string(from.max_batch) + " -> " + std::to_string(to.max_batch) + ")";
  };
  if (best.max_batch > other->max_batch) {
    return best.method + " lets the batch grow " + growth(*other, best) + " over " + other->method + ", and " +
           limit_phrase(*other) + ", so throughput rises " + format_number("%.0f", 100 * gain) + "%";
  }
  if (other->max_batch > best.max_batch) {
    const double cost = 1 - other->predicted_throughput / best.predicted_throughput;
    return other->method + " lets the batch grow " + growth(best, *other) + ", but " + limit_phrase(best) + ", so " +
           other->method + " would cost " + format_number("%.0f", 100 * cost) + "% throughput";
  }
  return best.method + " and " + other->method + " fit the same batch (" + std::to_string(best.max_batch) + "); " +
         best.method + " is predicted " + format_number("%.0f", 100 * gain) + "% faster";
}

}  // namespace

Advice advise(const std::vector<std::pair<std::string, ThroughputModel>>& models, const AdvisorOptions& options) {
  if (options.device_memory <= 0)
    throw UsageError("device memory must be > 0 bytes, not " + std::to_string(options.device_memory));
  if (!(options.headroom >= 0 && options.headroom < 1)) {
    throw UsageError("headroom " + format_number("%g", 100 * options.headroom) +
                     "% is out of range; expected 0% to <100%");
  }
  if (models.empty()) throw Error("advise: no methods to compare");
  Advice advice;
  advice.device_memory = options.device_memory;
  advice.headroom = options.headroom;
  advice.usable_bytes =
      static_cast<Bytes>(std::floor(static_cast<double>(options.device_memory) * (1 - options.headroom)));
  for (const auto& [name, model] : models) {
    MethodAdvice m;
    m.method = name;
    m.model = model;
    m.max_batch = largest_fitting_batch(model, advice.usable_bytes, options.batch_limit);
    if (model.alpha <= 0) m.note = "peak memory does not grow with the batch in the measurements";
    if (m.max_batch == options.batch_limit)
      m.note += (m.note.empty() ? "" : "; ") + std::string("capped at the batch limit");
    if (m.max_batch > 0) {
      m.best_batch = best_batch(model, m.max_batch);
      m.predicted_peak_bytes = model.peak_bytes(static_cast<double>(m.best_batch));
      m.predicted_throughput = model.throughput(static_cast<double>(m.best_batch));
      if (m.best_batch < m.max_batch) {
        m.note +=
            (m.note.empty() ? "" : "; ") + std::string("throughput falls beyond batch ") + std::to_string(m.best_batch);
      }
    } else {
      m.note = "does not fit even batch 1 (predicted " + format_bytes(static_cast<Bytes>(model.peak_bytes(1))) + ")";
    }
    advice.methods.push_back(m);
  }
  const MethodAdvice* best = nullptr;
  for (const MethodAdvice& m : advice.methods) {
    if (m.max_batch > 0 && (!best || m.predicted_throughput > best->predicted_throughput)) best = &m;
  }
  if (!best) {
    advice.reason = "no method fits even batch 1 in " + format_bytes(advice.usable_bytes);
    return advice;
  }
  advice.recommended = best->method;
  advice.reason = reason_for(advice, *best);
  return advice;
}

Advice advise_from_measurements(const std::vector<Measurement>& rows, const AdvisorOptions& options) {
  std::vector<std::pair<std::string, ThroughputModel>> models;
  for (const std::string& name : method_names(rows))
    models.emplace_back(name, fit_throughput_model(rows_of(rows, name)));
  return advise(models, options);
}

}  // namespace memtrain::predict
