#include "bench/lockstep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include <torch/version.h>

#include "cli/blas_library.h"
#include "core/error.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/input/brown_batches.h"

namespace memtrain::bench {

std::span<const runtime::StepRecord> LaneResult::planned() const {
  const size_t first = std::min(records.size(), static_cast<size_t>(std::max(collect_steps, 0)));
  return std::span<const runtime::StepRecord>(records).subspan(first);
}

double LaneResult::mean_step() const {
  double t = 0;
  for (const runtime::StepRecord& r : planned()) t += r.seconds;
  return planned().empty() ? 0 : t / static_cast<double>(planned().size());
}

double LaneResult::mean_schedule() const {
  double t = 0;
  for (const runtime::StepRecord& r : planned()) t += r.schedule_seconds;
  return planned().empty() ? 0 : t / static_cast<double>(planned().size());
}

Bytes LaneResult::planned_peak() const {
  Bytes peak = 0;
  for (const runtime::StepRecord& r : planned()) peak = std::max(peak, r.peak_bytes);
  return peak;
}

long LaneResult::planned_retries() const {
  long n = 0;
  for (const runtime::StepRecord& r : planned()) n += r.retries;
  return n;
}

long LaneResult::planned_violations() const {
  long n = 0;
  for (const runtime::StepRecord& r : planned()) n += r.violation;
  return n;
}

double LaneResult::max_peak_over_budget() const {
  return static_cast<double>(summary.max_peak_bytes) / static_cast<double>(summary.budget_bytes);
}

double LaneResult::cache_hit_rate() const {
  const long lookups = summary.cache_hits + summary.cache_misses;
  return lookups ? static_cast<double>(summary.cache_hits) / static_cast<double>(lookups) : 0;
}

double LaneResult::median_schedule_time_error() const {
  std::vector<double> errors;
  for (const runtime::StepRecord& s : planned())
    errors.push_back(std::abs(s.predicted_schedule_seconds - s.schedule_seconds) / s.schedule_seconds);
  return median(std::move(errors));
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t k = values.size() / 2;
  return values.size() % 2 ? values[k] : (values[k - 1] + values[k]) / 2;
}

CopyStats LaneResult::copies() const {
  CopyStats total;
  for (const runtime::StepRecord& r : planned()) total += r.copies;
  return total;
}

double LaneResult::mean_bytes(Bytes CopyStats::*field) const {
  const size_t n = planned().size();
  return n > 0 ? static_cast<double>(copies().*field) / static_cast<double>(n) : 0;
}

double LaneResult::copy_rate(bool to_host) const {
  const CopyStats c = copies();
  const double bytes = static_cast<double>(to_host ? c.to_host_bytes : c.to_device_bytes);
  const Seconds seconds = to_host ? c.to_host_seconds : c.to_device_seconds;
  return seconds > 0 ? bytes / seconds : 0;
}

LaneFactory lanes(std::function<std::unique_ptr<runtime::BatchSource>(std::uint64_t seed)> source,
                  runtime::Trainer::ModelFactory model) {
  return [source = std::move(source), model = std::move(model)](const runtime::TrainerOptions& o) {
    Lane lane;
    lane.memory = std::make_unique<runtime::CpuDeviceMemory>();
    lane.source = source(o.seed);
    lane.trainer = std::make_unique<runtime::Trainer>(o, *lane.memory, model, *lane.source);
    return lane;
  };
}

Chain measured_chain(const LaneFactory& make) {
  runtime::TrainerOptions o;
  o.steps.planner = "joint";
  o.budget = parse_budget("100%", "budget");
  Lane lane = make(o);
  lane.trainer->calibrate();
  return lane.trainer->largest_chain();
}

LaneFactory tagger_lanes(std::shared_ptr<const data::TaggingDataset> data) {
  const runtime::DataShape shape{data->words.size(), data->tags.size(), data->max_length, 1};
  return lanes([data](std::uint64_t seed) { return std::make_unique<runtime::BrownBatches>(data, 32, seed); },
               [shape] { return runtime::make_model("transformer", {}, shape); });
}

std::map<std::string, LaneResult> run_lockstep(const std::vector<std::string>& planners, const std::string& budget,
                                               int steps, const LaneFactory& make, const std::string& label,
                                               std::map<std::string, Lane>* kept) {
  std::map<std::string, LaneResult> results;
  std::map<std::string, Lane> lanes;
  for (const std::string& p : planners) {
    runtime::TrainerOptions o;
    o.steps.planner = p;
    o.budget = parse_budget(budget, "--budgets");
    results[p].collect_steps = o.steps.collect_steps;
    Lane lane = make(o);
    try {
      lane.trainer->calibrate();
      lanes[p] = std::move(lane);
    } catch (const Error& e) {
      results[p].feasible = false;
      results[p].why = e.what();
    }
  }
  for (int s = 0; s < steps; ++s) {
    for (const std::string& p : abba_order(planners, s)) {
      if (lanes.count(p)) lanes[p].trainer->step();
    }
    std::fprintf(stderr, "\r%s, budget %s: step %d/%d", label.c_str(), budget.c_str(), s + 1, steps);
  }
  std::fprintf(stderr, "\n");
  for (auto& [p, lane] : lanes) {
    results[p].summary = lane.trainer->summary();
    results[p].records = lane.trainer->records();
  }
  if (kept) *kept = std::move(lanes);
  return results;
}

std::string machine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores, LibTorch " + TORCH_VERSION +
         " (CPU), BLAS " + cli::blas_name(cli::loaded_blas_library());
}

std::string today() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

int bench_main(const char* name, int (*run)(const std::vector<std::string>&), int argc, char** argv) {
  auto report = [&](const std::exception& e) {
    const std::string message = e.what(), prefix = std::string(name) + ":";
    // Flag errors already name the benchmark.
    if (message.rfind(prefix, 0) == 0)
      std::fprintf(stderr, "%s\n", message.c_str());
    else
      std::fprintf(stderr, "%s %s\n", prefix.c_str(), message.c_str());
  };
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    report(e);
    return 2;
  } catch (const std::exception& e) {
    report(e);
    return 1;
  }
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::vector<std::string> percent_budgets(const std::string& list) {
  std::vector<std::string> budgets;
  std::stringstream in(list);
  for (std::string b; std::getline(in, b, ',');) budgets.push_back(b + "%");
  return budgets;
}

void target_line(std::ostream& md, bool met, const std::string& what) {
  md << "- " << (met ? "met" : "**not met**") << ": " << what << "\n";
}

void publish(const std::string& name, const std::string& report, const std::string& path) {
  std::fputs(report.c_str(), stdout);
  const std::string begin = "<!-- " + name + ":begin -->", end = "<!-- " + name + ":end -->";
  std::string doc;
  {
    std::ifstream in(path);
    doc.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t b = doc.find(begin), e = doc.find(end);
  const std::string section = begin + "\n" + report + end;
  if (b != std::string::npos && e != std::string::npos && e > b)
    doc.replace(b, e + end.size() - b, section);
  else
    doc += (doc.empty() ? "# Benchmarks\n\n" : "\n") + section + "\n";
  std::ofstream out(path);
  if (!out) throw Error("--out: cannot write '" + path + "'");
  out << doc;
  std::fprintf(stderr, "%s: wrote %s\n", name.c_str(), path.c_str());
}

}  // namespace memtrain::bench
