// Benchmark for the performance model and advisor, on this
// machine: five model configurations, each profiled with every method over a
// range of batch sizes; PAPAYA's model fitted per method; the advisor asked
// about a roomy and a tight device; and its answers checked by measurement: the largest batch that really fits
// (bisection on the measured peak) and the method that is really fastest.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "cli/profile_flags.h"
#include "cli/workload_flags.h"
#include "predict/advisor.h"

namespace memtrain::bench {

namespace {

struct Config {
  std::string name;
  std::string description;
  cli::WorkloadFlags flags;
  std::vector<std::int64_t> batches;
  // Devices to advise for: each holds `none` at this batch, with the headroom.
  std::vector<std::int64_t> device_batches;
};

Config tagger(const std::string& name, std::int64_t layers, std::int64_t width, std::int64_t heads,
              std::int64_t max_length, std::vector<std::int64_t> batches, std::vector<std::int64_t> device_batches) {
  Config c{name, "", {}, std::move(batches), std::move(device_batches)};
  c.flags.spec.layers = layers;
  c.flags.spec.width = width;
  c.flags.spec.heads = heads;
  c.flags.max_length = max_length;
  c.description = "Transformer tagger, " + std::to_string(layers) + " layers, width " + std::to_string(width) +
                  ", Brown sentences up to " + std::to_string(max_length) + " tokens";
  return c;
}

Config resnet(const std::string& name, std::int64_t width, std::int64_t scale, std::vector<std::int64_t> batches,
              std::vector<std::int64_t> device_batches) {
  Config c{name, "", {}, std::move(batches), std::move(device_batches)};
  c.flags.model = "resnet";
  c.flags.data = "fashion-mnist";
  c.flags.spec.width = width;
  c.flags.max_scale = scale;
  c.description = "ResNet, width " + std::to_string(width) + ", Fashion-MNIST at " + std::to_string(scale) + " px";
  return c;
}

struct MethodCheck {
  std::string method;
  std::int64_t measured_max_batch = 0;  // largest batch whose measured peak fits the usable memory
  double measured_best_throughput = 0;  // at the measured largest batch or the predicted best, whichever is faster
  std::int64_t measured_best_batch = 0;
};

struct DeviceResult {
  std::int64_t none_batch = 0;  // the device holds `none` at this batch
  predict::Advice advice;
  std::vector<MethodCheck> checks;
  std::string measured_best;
};

struct ConfigResult {
  Config config;
  std::vector<DeviceResult> devices;
};

// Measurements by method and batch, each taken once.
class Measurer {
 public:
  Measurer(const cli::Workload& w, runtime::ProfileOptions o) : w_(w), o_(std::move(o)) {}

  const runtime::ProfilePoint& timed(const runtime::ProfileMethod& m, std::int64_t batch) {
    const auto key = std::make_pair(m.name, batch);
    auto it = timed_.find(key);
    if (it == timed_.end()) it = timed_.emplace(key, run(m, batch, o_)).first;
    return it->second;
  }
  // A peak needs no timing: calibration and one step.
  Bytes peak(const runtime::ProfileMethod& m, std::int64_t batch) {
    const auto key = std::make_pair(m.name, batch);
    if (const auto it = timed_.find(key); it != timed_.end()) return it->second.measurement.peak_bytes;
    auto it = peaks_.find(key);
    if (it == peaks_.end()) {
      runtime::ProfileOptions quick = o_;
      quick.warmup_steps = 0;
      quick.timed_steps = 1;
      it = peaks_.emplace(key, run(m, batch, quick).measurement.peak_bytes).first;
    }
    return it->second;
  }

 private:
  runtime::ProfilePoint run(const runtime::ProfileMethod& m, std::int64_t batch, const runtime::ProfileOptions& o) {
    return runtime::profile_batch(
        m, batch, w_.model_factory(), [&](std::int64_t b) { return w_.batches(b, o.seed); }, o);
  }
  const cli::Workload& w_;
  runtime::ProfileOptions o_;
  std::map<std::pair<std::string, std::int64_t>, runtime::ProfilePoint> timed_;
  std::map<std::pair<std::string, std::int64_t>, Bytes> peaks_;
};

// The largest batch whose measured peak fits `usable`: the peak grows with
// the batch, so bisection between a batch that fits and one that does not.
std::int64_t measured_max_batch(Measurer& measurer, const runtime::ProfileMethod& m, Bytes usable, std::int64_t guess) {
  auto fits = [&](std::int64_t b) { return measurer.peak(m, b) <= usable; };
  if (!fits(1)) return 0;
  std::int64_t lo = 1, hi = std::max<std::int64_t>(2, guess);
  if (fits(hi)) {
    lo = hi;
    for (hi = lo * 2; fits(hi); hi *= 2) lo = hi;
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

ConfigResult run_config(const Config& config, const runtime::ProfileOptions& options, double headroom) {
  std::fprintf(stderr, "advisor_bench: %s\n", config.name.c_str());
  const cli::Workload workload(config.flags);
  const std::vector<runtime::ProfileMethod> methods = {
      runtime::parse_profile_method("none", cli::kDefaultCheckpointPlanner, std::nullopt),
      runtime::parse_profile_method("checkpoint", cli::kDefaultCheckpointPlanner, std::nullopt),
      runtime::parse_profile_method("checkpoint:sqrt", cli::kDefaultCheckpointPlanner, std::nullopt)};
  cli::ProfileRequest request;
  request.methods = methods;
  request.batches = config.batches;
  request.options = options;
  request.threads = 1;
  std::vector<predict::Measurement> rows;
  for (const runtime::ProfilePoint& p : cli::run_profile_sweep(workload, request)) rows.push_back(p.measurement);

  Measurer measurer(workload, options);
  ConfigResult result{config, {}};
  for (std::int64_t none_batch : config.device_batches) {
    predict::AdvisorOptions ao;
    ao.headroom = headroom;
    // Half way between none's peaks at its batch and the next, so that one
    // batch more does not fit and the boundary is not a knife edge.
    const double between = (static_cast<double>(measurer.peak(methods[0], none_batch)) +
                            static_cast<double>(measurer.peak(methods[0], none_batch + 1))) /
                           2;
    ao.device_memory = static_cast<Bytes>(between / (1 - headroom)) + 1;
    DeviceResult d{none_batch, predict::advise_from_measurements(rows, ao), {}, ""};
    for (size_t k = 0; k < methods.size(); ++k) {
      const predict::MethodAdvice& advice = d.advice.methods[k];
      MethodCheck check;
      check.method = methods[k].name;
      check.measured_max_batch = measured_max_batch(measurer, methods[k], d.advice.usable_bytes, advice.max_batch);
      for (std::int64_t b : {check.measured_max_batch, std::min(advice.best_batch, check.measured_max_batch)}) {
        if (b < 1) continue;
        const double t = static_cast<double>(b) / measurer.timed(methods[k], b).measurement.step_seconds;
        if (t > check.measured_best_throughput) {
          check.measured_best_throughput = t;
          check.measured_best_batch = b;
        }
      }
      std::fprintf(
          stderr,
          "advisor_bench: %s device %s %s: predicted max batch %lld, measured %lld; best %.1f samples/s at %lld\n",
          config.name.c_str(), format_bytes(d.advice.device_memory).c_str(), check.method.c_str(),
          static_cast<long long>(advice.max_batch), static_cast<long long>(check.measured_max_batch),
          check.measured_best_throughput, static_cast<long long>(check.measured_best_batch));
      d.checks.push_back(check);
    }
    d.measured_best =
        std::max_element(d.checks.begin(), d.checks.end(), [](const MethodCheck& a, const MethodCheck& b) {
          return a.measured_best_throughput < b.measured_best_throughput;
        })->method;
    result.devices.push_back(std::move(d));
  }
  return result;
}

// The best's throughput over the runner-up's, minus 1.
double margin(std::vector<double> throughputs) {
  std::sort(throughputs.rbegin(), throughputs.rend());
  return throughputs.size() < 2 || throughputs[1] <= 0 ? 0 : throughputs[0] / throughputs[1] - 1;
}

double predicted_margin(const predict::Advice& a) {
  std::vector<double> t;
  for (const predict::MethodAdvice& m : a.methods) t.push_back(m.predicted_throughput);
  return margin(t);
}

double measured_margin(const DeviceResult& d) {
  std::vector<double> t;
  for (const MethodCheck& c : d.checks) t.push_back(c.measured_best_throughput);
  return margin(t);
}

std::string batches_text(const std::vector<std::int64_t>& b) {
  std::string s;
  for (std::int64_t v : b) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

// What the advice got right, counted over the methods table.
struct AdviceCounts {
  int r2_ok = 0, r2_total = 0, batch_within = 0, batch_total = 0;
  std::vector<int> hits = std::vector<int>(2, 0);  // by device: roomy, tight
};

// One row per configuration, device and method: the fits, predicted and measured batches and throughputs.
AdviceCounts write_methods_table(std::ostringstream& md, const std::vector<ConfigResult>& results) {
  AdviceCounts n;
  for (const ConfigResult& r : results) {
    for (size_t d = 0; d < r.devices.size(); ++d) {
      const DeviceResult& dev = r.devices[d];
      for (size_t k = 0; k < dev.checks.size(); ++k) {
        const predict::MethodAdvice& a = dev.advice.methods[k];
        const MethodCheck& c = dev.checks[k];
        md << "| " << (d == 0 && k == 0 ? r.config.name + " (" + batches_text(r.config.batches) + ")" : "") << " | "
           << (k == 0 ? format_bytes(dev.advice.device_memory) + " (" + std::to_string(dev.none_batch) + ")" : "")
           << " | " << c.method << " | " << format_number("%.4f", a.model.r2_memory) << " | "
           << format_number("%.4f", a.model.r2_time) << " | " << a.max_batch << " | " << c.measured_max_batch << " | "
           << format_number("%.1f", a.predicted_throughput) << " at " << a.best_batch << " | "
           << format_number("%.1f", c.measured_best_throughput) << " at " << c.measured_best_batch << " |\n";
        if (d == 0) {
          ++n.r2_total;
          n.r2_ok += a.model.r2_memory >= 0.97 && a.model.r2_time >= 0.95;
        }
        if (c.measured_max_batch > 0) {
          ++n.batch_total;
          n.batch_within +=
              std::abs(static_cast<double>(a.max_batch) / static_cast<double>(c.measured_max_batch) - 1) <= 0.10;
        }
      }
      n.hits[d] += dev.advice.recommended == dev.measured_best;
    }
  }
  return n;
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "advisor_bench");
  const std::string out_path = flags.text("out", "docs/BENCHMARKS.md");
  runtime::ProfileOptions options;
  options.warmup_steps = static_cast<int>(flags.integer("warmup", 2, 0, 100));
  options.timed_steps = static_cast<int>(flags.integer("timed-steps", 5, 1, 100));
  const double headroom = flags.real("headroom", 0.10, 0, 0.9);
  flags.check_all_used();
  // One thread: on this 2-core machine two threads make step times swing by 2x
  // from one step to the next, and one thread is faster.
  at::set_num_threads(1);

  const std::vector<Config> configs = {tagger("tagger-small", 2, 64, 2, 64, {4, 8, 16, 32, 64, 128}, {32, 4}),
                                       tagger("tagger", 6, 128, 4, 64, {4, 8, 16, 32, 64, 128}, {32, 4}),
                                       tagger("tagger-long", 2, 64, 2, 180, {2, 4, 8, 16, 32, 64}, {16, 2}),
                                       // Up to 64 only: past that the CPU's ResNet step grows faster than linearly
                                       // (none: 104 samples/s at 16, 63 at 128), which the model cannot follow, and
                                       // no device below needs more than 52.
                                       resnet("resnet-small", 8, 56, {4, 8, 16, 32, 64}, {32, 4}),
                                       resnet("resnet", 16, 56, {4, 8, 16, 32, 64}, {32, 4})};
  std::vector<ConfigResult> results;
  for (const Config& c : configs) results.push_back(run_config(c, options, headroom));

  std::ostringstream md;
  md << "## Performance model and advisor (CPU)\n\n"
     << "Command: `build/bench/advisor_bench` (or `scripts/bench.sh advisor`)  \n"
     << "Machine: " << machine() << ", 1 thread  \n"
     << "Date: " << today() << "  \n"
     << "Each configuration is profiled (`memtrain profile`'s measurement: the dataset's largest input, "
     << options.warmup_steps << " warm-up steps, median of " << options.timed_steps
     << " timed steps, peak with the optimizer update) with `none`, `checkpoint` (planner `all` at its least budget) "
     << "and `checkpoint:sqrt`, and PAPAYA's model is fitted per method. The advisor is then asked about two devices "
     << "per configuration: a roomy one that holds `none` at a middle batch and a tight one that holds it only at a "
     << "small batch (device memory: half way between the measured peaks of `none` at that batch and the next, plus "
     << format_number("%.0f", 100 * headroom)
     << "% headroom). Measured max batch: bisection on the measured peak against the usable memory. Measured best: "
        "each "
     << "method run at its measured max batch and at the advisor's best batch, the faster kept; the measured-best "
     << "method is the one with the highest of those.\n\n";
  md << "| configuration | device (none fits) | method | R² memory | R² time | predicted max batch | measured max "
        "batch "
        "| predicted best (samples/s) | measured best (samples/s) |\n|---|---|---|---|---|---|---|---|---|\n";
  const AdviceCounts n = write_methods_table(md, results);
  md << "\nMargin: the recommended method's predicted throughput over the runner-up's; measured: the measured-best "
        "method's over the runner-up's. On this 2-core machine the same step measured twice can differ by 10% or more "
        "at small batches, so margins of a few percent are within noise.\n\n"
     << "| configuration | model | device | recommended | predicted margin | measured best | measured margin | reason "
        "|\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const ConfigResult& r : results) {
    for (const DeviceResult& dev : r.devices) {
      md << "| " << r.config.name << " | " << r.config.description << " | " << format_bytes(dev.advice.device_memory)
         << " | " << dev.advice.recommended << " | " << format_number("%+.1f%%", 100 * predicted_margin(dev.advice))
         << " | " << dev.measured_best << " | " << format_number("%+.1f%%", 100 * measured_margin(dev)) << " | "
         << dev.advice.reason << " |\n";
    }
  }
  md << "\n### Targets\n\n";
  target_line(md, n.r2_ok == n.r2_total,
              "R² >= 0.97 for memory and >= 0.95 for time: " + std::to_string(n.r2_ok) + " of " +
                  std::to_string(n.r2_total) + " configuration-methods");
  target_line(md, n.hits[0] >= 4,
              "roomy devices: the recommendation is the measured-best method in " + std::to_string(n.hits[0]) +
                  " of 5 configurations (target 4)");
  target_line(md, n.hits[1] >= 4,
              "tight devices: the recommendation is the measured-best method in " + std::to_string(n.hits[1]) +
                  " of 5 configurations (target 4)");
  target_line(md, n.batch_within == n.batch_total,
              "predicted max batch within 10% of the measured one: " + std::to_string(n.batch_within) + " of " +
                  std::to_string(n.batch_total) + " configuration-device-methods");
  md << "\n";
  publish("advisor_bench", md.str(), out_path);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("advisor_bench", memtrain::bench::run, argc, argv);
}
