// memtrain's host Adam against the memory's speed and against LibTorch's own
// Adam, on the same tensors. The limit is a STREAM-like triad (a = b + s*c)
// over arrays larger than the caches, on as many threads as the update uses.
// The contenders, each timed in turns (round by round, best of each):
// - memtrain's Adam::apply, one fused pass over w, m, v and g;
// - at::_fused_adam_, what torch.optim.Adam(fused=True) runs on the CPU;
// - the _foreach_ form torch.optim.Adam(foreach=True) runs (_multi_tensor_adam).
// An update reads w, m, v, g and writes w, m, v: 7 arrays of the weights'
// size; the triad moves 3. Both are reported in bytes per second.
//
// Also the spread of Adam::measure_host_seconds_per_byte over repeated
// calibrations: the update rate the Simulator prices weights in host memory
// with; and, beside each, a triad timed the same way, whose own spread is
// the memory's speed moving under the calibration.
//
//   build/bench/host_adam_bench [--mib 64] [--rounds 7] [--calibrations 10] [--out docs/BENCHMARKS.md]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/error.h"
#include "runtime/model/adam.h"

namespace memtrain::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(const std::function<void()>& f) {
  const Clock::time_point t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// a = b + s*c over `threads` threads of our own, each on its slice.
void triad(float* a, const float* b, const float* c, float s, std::int64_t n, int threads) {
  const auto slice = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
  };
  std::vector<std::thread> workers;
  const std::int64_t chunk = (n + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) workers.emplace_back(slice, std::min(n, t * chunk), std::min(n, (t + 1) * chunk));
  slice(0, std::min(n, chunk));
  for (std::thread& w : workers) w.join();
}

// Every contender starts from the same weights and gradient.
// The triad timed as Adam::measure_host_seconds_per_byte times the update
// (fresh arrays of `n` floats, one untimed pass, the fastest of 5), per byte
// of one array: taken beside each calibration, it shows how much of the
// calibration's spread is the memory's own speed moving.
double triad_seconds_per_byte(std::int64_t n) {
  torch::Tensor a = torch::empty({n});
  const torch::Tensor b = torch::randn({n}), c = torch::randn({n});
  at::add_out(a, b, c, 3.0);
  double fastest = 0;
  for (int r = 0; r < 5; ++r) {
    const double s = seconds_of([&] { at::add_out(a, b, c, 3.0); });
    fastest = r == 0 ? s : std::min(fastest, s);
  }
  return fastest / (static_cast<double>(n) * sizeof(float));
}

struct Tensors {
  torch::Tensor w, m, v, g, step;
  Tensors(const torch::Tensor& w0, const torch::Tensor& g0)
      : w(w0.clone()), m(torch::zeros_like(w0)), v(torch::zeros_like(w0)), g(g0.clone()),
        step(torch::zeros({}, torch::kFloat)) {}
};

// torch.optim.Adam(foreach=True)'s update on the CPU (_multi_tensor_adam), step t.
void foreach_adam(Tensors& s, const runtime::AdamOptions& o, long t) {
  std::vector<torch::Tensor> w{s.w}, m{s.m}, v{s.v}, g{s.g};
  at::_foreach_lerp_(m, g, 1 - o.beta1);
  at::_foreach_mul_(v, o.beta2);
  at::_foreach_addcmul_(v, g, g, 1 - o.beta2);
  const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, std::sqrt(bias2));
  at::_foreach_add_(denom, o.eps);
  at::_foreach_addcdiv_(w, m, denom, -o.lr / bias1);
}

// torch.optim.Adam(fused=True)'s update on the CPU.
void fused_adam(Tensors& s, const runtime::AdamOptions& o) {
  s.step.add_(1);
  at::_fused_adam_({s.w}, {s.g}, {s.m}, {s.v}, {}, {s.step}, o.lr, o.beta1, o.beta2, o.weight_decay, o.eps, false,
                   false);
}

// The contenders' seconds per round (the triads' too), taking turns, and
// how far apart the updates' weights ended.
struct UpdateTimes {
  std::map<std::string, std::vector<double>> times;
  double fused_diff = 0, foreach_diff = 0;
};

UpdateTimes time_updates(std::int64_t n, int rounds, int threads, const runtime::Adam& memtrain_adam) {
  const runtime::AdamOptions options;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  torch::Tensor ta = torch::zeros({n});
  const torch::Tensor tb = torch::ones({n}), tc = torch::full({n}, 2.0f);
  torch::manual_seed(1);
  const torch::Tensor w0 = torch::randn({n}), g0 = torch::randn({n});
  Tensors mine(w0, g0), fused(w0, g0), multi(w0, g0);
  UpdateTimes u;
  std::map<std::string, std::vector<double>>& times = u.times;
  long t = 0;
  // One untimed round first: fresh pages' first touch and the threads' start.
  for (int r = 0; r <= rounds; ++r) {
    ++t;
    const double tri = seconds_of([&] { triad(a.data(), b.data(), c.data(), 3.0f, n, threads); });
    const double aten_tri = seconds_of([&] { at::add_out(ta, tb, tc, 3.0); });
    const double own = seconds_of([&] { memtrain_adam.apply(mine.w, mine.m, mine.v, mine.g, t); });
    const double fus = seconds_of([&] { fused_adam(fused, options); });
    const double fe = seconds_of([&] { foreach_adam(multi, options, t); });
    if (r == 0) continue;
    times["triad"].push_back(tri);
    times["aten triad"].push_back(aten_tri);
    times["memtrain"].push_back(own);
    times["fused"].push_back(fus);
    times["foreach"].push_back(fe);
  }
  // The three updates computed the same weights (same float operations in the same order is
  // not promised: report the largest difference).
  u.fused_diff = (mine.w - fused.w).abs().max().item<double>();
  u.foreach_diff = (mine.w - multi.w).abs().max().item<double>();
  return u;
}

// Repeated calibrations of the host update's rate, each with a triad beside it.
struct Calibrations {
  std::vector<double> calibrated, triads, relative;
};

Calibrations calibrate(std::int64_t mib, std::int64_t n, int calibrations) {
  Calibrations c;
  std::vector<double>&calibrated = c.calibrated, &triads = c.triads, &relative = c.relative;
  for (int i = 0; i < calibrations; ++i) {
    calibrated.push_back(runtime::Adam::measure_host_seconds_per_byte(mib << 20));
    triads.push_back(triad_seconds_per_byte(n));
    relative.push_back(calibrated.back() / triads.back());
  }
  return c;
}

// One row per contender: its best time, the bytes it moved per second, against the triad's.
void write_contenders(std::ostringstream& md, std::map<std::string, std::vector<double>>& times, int threads,
                      double update_bytes, double triad_bytes) {
  const auto best = [&](const std::string& k) { return *std::min_element(times[k].begin(), times[k].end()); };
  const double triad_rate = triad_bytes / std::min(best("triad"), best("aten triad"));
  const auto rate = [&](const std::string& k) { return update_bytes / best(k); };
  md << "| contender | best seconds | GB/s moved | of the triad's bandwidth | memtrain's speed / its |\n"
     << "|---|---|---|---|---|\n"
     << "| triad a = b + s*c, a loop on " << threads << " threads | " << fixed(best("triad"), 4) << " | "
     << fixed(triad_bytes / best("triad") / 1e9, 2) << " | " << fixed(100 * triad_bytes / best("triad") / triad_rate, 1)
     << "% | |\n"
     << "| triad a = b + s*c, `at::add_out` | " << fixed(best("aten triad"), 4) << " | "
     << fixed(triad_bytes / best("aten triad") / 1e9, 2) << " | "
     << fixed(100 * triad_bytes / best("aten triad") / triad_rate, 1) << "% | |\n";
  for (const auto& [key, label] : std::vector<std::pair<std::string, std::string>>{
           {"memtrain", "memtrain `Adam::apply` (one fused pass, on LibTorch's threads)"},
           {"fused", "`at::_fused_adam_` (torch.optim.Adam(fused=True))"},
           {"foreach", "`_foreach_` ops (torch.optim.Adam(foreach=True))"}}) {
    md << "| " << label << " | " << fixed(best(key), 4) << " | " << fixed(rate(key) / 1e9, 2) << " | "
       << fixed(100 * rate(key) / triad_rate, 1) << "% | " << fixed(best(key) / best("memtrain"), 2) << "x |\n";
  }
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "host_adam_bench");
  const std::int64_t mib = flags.integer("mib", 64, 1, 4096);
  const int rounds = static_cast<int>(flags.integer("rounds", 7, 1, 1000));
  const int calibrations = static_cast<int>(flags.integer("calibrations", 10, 2, 1000));
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();

  torch::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  const std::int64_t n = (mib << 20) / static_cast<std::int64_t>(sizeof(float));
  const double update_bytes = 7.0 * static_cast<double>(n) * sizeof(float);
  const double triad_bytes = 3.0 * static_cast<double>(n) * sizeof(float);
  const runtime::AdamOptions options;
  const runtime::Adam memtrain_adam({}, options);

  UpdateTimes u = time_updates(n, rounds, threads, memtrain_adam);
  std::map<std::string, std::vector<double>>& times = u.times;
  const auto best = [&](const std::string& k) { return *std::min_element(times[k].begin(), times[k].end()); };
  // The limit: the faster of the two triads (a loop on our threads, ATen's add).
  const double triad_rate = triad_bytes / std::min(best("triad"), best("aten triad"));
  const auto rate = [&](const std::string& k) { return update_bytes / best(k); };
  const double fused_diff = u.fused_diff, foreach_diff = u.foreach_diff;

  const Calibrations cal = calibrate(mib, n, calibrations);
  const std::vector<double>&calibrated = cal.calibrated, &triads = cal.triads, &relative = cal.relative;
  const auto spread = [](const std::vector<double>& xs) {
    return *std::max_element(xs.begin(), xs.end()) / *std::min_element(xs.begin(), xs.end());
  };
  const double lo = *std::min_element(calibrated.begin(), calibrated.end());
  const double hi = *std::max_element(calibrated.begin(), calibrated.end());

  std::ostringstream md;
  md << "## Host Adam against the memory's speed (CPU)\n\n"
     << "Command: `build/bench/host_adam_bench --mib " << mib << " --rounds " << rounds << " --calibrations "
     << calibrations << "` (or `scripts/bench.sh host-adam`)  \n"
     << "Machine: " << machine() << ", " << threads << " threads  \n"
     << "Date: " << today() << "  \n"
     << "Weights of " << mib << " MiB (float32); best of " << rounds
     << " rounds, the contenders taking turns each round. An update moves 7 arrays of the weights' size (reads w, "
        "m, v, g; writes w, m, v), the triad 3.\n\n";
  write_contenders(md, times, threads, update_bytes, triad_bytes);
  md << "\nLargest weight difference after " << rounds + 1 << " updates: memtrain against fused "
     << format_number("%.3g", fused_diff) << ", against foreach " << format_number("%.3g", foreach_diff) << ".\n\n"
     << "Calibration (`Adam::measure_host_seconds_per_byte`, " << calibrations << " repeats of " << mib
     << " MiB): " << format_number("%.3g", lo * 1e9) << " to " << format_number("%.3g", hi * 1e9)
     << " ns per byte of weights, a spread of " << fixed(hi / lo, 3)
     << "x. The triad timed the same way beside each (fresh arrays, the fastest of 5 after one untimed pass): a "
        "spread of "
     << fixed(spread(triads), 3) << "x; each calibration against the triad beside it: a spread of "
     << fixed(spread(relative), 3) << "x.\n\n";
  const double torch_best = std::min(best("fused"), best("foreach"));
  // An update 2x faster than LibTorch's fastest would move its 7 arrays at
  // twice that rate; the triad's own traffic is 4 arrays (its output's
  // lines are read before they are written), the most this memory moved.
  const double needed = 2 * update_bytes / torch_best, triad_traffic = triad_rate * 4 / 3;
  md << "An update 2x faster than LibTorch's fastest form would move its 7 arrays at " << fixed(needed / 1e9, 1)
     << " GB/s: " << fixed(needed / triad_traffic, 2)
     << "x what the triad moves counting the reads of its output's lines (" << fixed(triad_traffic / 1e9, 1) << " GB/s)"
     << (needed > triad_traffic ? ", more than this memory was seen to move" : "") << ".\n\n";
  md << "### Targets\n\n";
  target_line(md, rate("memtrain") >= 0.7 * triad_rate,
              "memtrain's host Adam at " + fixed(100 * rate("memtrain") / triad_rate, 1) +
                  "% of the triad's bandwidth (target 70%)");
  target_line(md, torch_best >= 2 * best("memtrain"),
              "memtrain's host Adam " + fixed(torch_best / best("memtrain"), 2) +
                  "x faster than LibTorch's fastest form (target 2x)");
  target_line(md, hi / lo <= 1.15,
              "calibration spread " + fixed(hi / lo, 3) + "x (target at most 1.15x; the triad beside it " +
                  fixed(spread(triads), 3) + "x)");
  publish("host_adam_bench", md.str(), out);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("host_adam_bench", memtrain::bench::run, argc, argv);
}
