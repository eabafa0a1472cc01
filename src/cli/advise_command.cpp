// `memtrain advise`: fit PAPAYA's model per method (from measurements taken
// here or elsewhere), say which method and batch size give the highest
// throughput on a device, plot it, and optionally check it by running it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/compute_threads.h"
#include "cli/flags.h"
#include "cli/gnuplot.h"
#include "cli/help_text.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "cli/profile_flags.h"
#include "cli/rank_advice.h"
#include "cli/workload_flags.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "predict/advisor.h"

namespace memtrain::cli {

namespace {

const char* kAdviseHelp =
    "usage: memtrain advise --device-memory SIZE [--headroom N%] [--from-csv FILE] [flags]\n"
    "\n"
    "Fits, per method, peak memory M(b) = alpha*b + beta and step time t(b) = max(a, k*b) + c\n"
    "to measurements at several batch sizes b (at least 4 per method), then prints per method\n"
    "the largest batch that fits the device, the batch with the highest predicted throughput\n"
    "(the largest, or the knee when throughput falls beyond it), its predicted peak and\n"
    "throughput, and the method to use with the reason. Without --from-csv it first measures here, as\n"
    "`memtrain profile` does with the same flags.\n"
    "\n"
    "  --device-memory SIZE         the device's memory (e.g. 16GiB, 800MiB)\n"
    "  --headroom N%                memory kept free (default 10%)\n"
    "  --from-csv FILE              measurements taken elsewhere: a header and the columns\n"
    "                               method,batch,peak_bytes,step_seconds (docs/usage.md)\n"
    "  --csv FILE                   write the measurements taken here as CSV\n"
    "  --json FILE                  write the fitted models and the advice as JSON\n"
    "  --plot FILE.svg|.png         predicted and measured throughput against memory (default advise.svg)\n"
    "  --validate                   run each method at its predicted best batch and print\n"
    "                               predicted against measured throughput and peak memory\n"
    "  --batch-limit N              largest batch considered (default 1048576)\n"
    "\n"
    "Across ranks (data parallelism, as `train --ranks`):\n"
    "  --ranks LIST                 rank counts on this machine, e.g. 2,4: for each, measures the\n"
    "                               ranks' all-reduce at the model's gradient size and how much slower\n"
    "                               they compute at once (`comm bench`), then predicts per method the\n"
    "                               batch per rank with the highest throughput, its step time (compute\n"
    "                               + all-reduce + the step's small gathers) and the job's samples/s;\n"
    "                               with --validate, runs each (`profile --ranks`) and prints measured\n"
    "                               against predicted. The sweep runs with the threads each rank gets\n"
    "                               (--threads, default the cores divided by the largest count); `vs 1\n"
    "                               rank` compares with one process of those threads.\n"
    "  --timeout S                  with --ranks: a rank that does not answer within S seconds is named\n"
    "\n"
    "To measure here or to validate:\n"
    "WORKLOAD"
    "PROFILE";

double parse_headroom(const std::string& text) {
  const std::string valid = "expected N% with 0 <= N < 100, e.g. 10%";
  if (text.empty() || text.back() != '%') throw UsageError("--headroom '" + text + "': " + valid);
  const std::optional<double> v = parse_whole_real(text.substr(0, text.size() - 1));
  if (!v || !(*v >= 0 && *v < 100)) throw UsageError("--headroom '" + text + "': " + valid);
  return *v / 100;
}

struct Validation {
  std::string method;
  std::int64_t batch = 0;
  double predicted_throughput = 0, measured_throughput = 0;
  double predicted_peak_bytes = 0;
  Bytes measured_peak_bytes = 0;
  bool fits = false;
};

// Fits each method with enough measurements; the others are reported and left out.
std::vector<std::pair<std::string, predict::ThroughputModel>> fit_methods(
    const std::vector<predict::Measurement>& rows) {
  std::vector<std::pair<std::string, predict::ThroughputModel>> models;
  for (const std::string& name : predict::method_names(rows)) {
    try {
      models.emplace_back(name, predict::fit_throughput_model(predict::rows_of(rows, name)));
    } catch (const Error& e) {
      std::fprintf(stderr, "memtrain: left out: %s\n", e.what());
    }
  }
  if (models.empty()) throw Error("advise: no method has enough measurements to fit (at least 4 each)");
  return models;
}

void print_advice(const predict::Advice& a) {
  std::printf("device memory %s, headroom %.0f%%: %s usable\n", format_bytes(a.device_memory).c_str(), 100 * a.headroom,
              format_bytes(a.usable_bytes).c_str());
  std::printf("%-20s %7s %7s %12s %12s %10s %12s %10s %9s %9s %12s %11s\n", "method", "R2 mem", "R2 time",
              "bytes/sample", "beta", "a (s)", "k (s/sample)", "c (s)", "max batch", "best", "pred peak", "samples/s");
  for (const predict::MethodAdvice& m : a.methods) {
    std::printf("%-20s %7.4f %7.4f %12s %12s %10.4g %12.4g %10.4g %9lld %9lld %12s %11.1f%s%s\n", m.method.c_str(),
                m.model.r2_memory, m.model.r2_time, format_bytes(static_cast<Bytes>(m.model.alpha)).c_str(),
                format_bytes(static_cast<Bytes>(m.model.beta)).c_str(), m.model.a, m.model.k, m.model.c,
                static_cast<long long>(m.max_batch), static_cast<long long>(m.best_batch),
                format_bytes(static_cast<Bytes>(m.predicted_peak_bytes)).c_str(), m.predicted_throughput,
                m.note.empty() ? "" : "  ", m.note.c_str());
  }
  if (a.recommended.empty())
    std::printf("recommended: nothing: %s\n", a.reason.c_str());
  else
    std::printf("recommended: %s: %s\n", a.recommended.c_str(), a.reason.c_str());
}

nlohmann::json advice_json(const predict::Advice& a, const std::vector<Validation>& validation) {
  nlohmann::json j;
  j["device_memory_bytes"] = a.device_memory;
  j["headroom"] = a.headroom;
  j["usable_bytes"] = a.usable_bytes;
  j["methods"] = nlohmann::json::array();
  for (const predict::MethodAdvice& m : a.methods) {
    j["methods"].push_back({{"method", m.method},
                            {"r2_memory", m.model.r2_memory},
                            {"r2_time", m.model.r2_time},
                            {"alpha", m.model.alpha},
                            {"beta", m.model.beta},
                            {"memory_floor", m.model.memory_floor},
                            {"a", m.model.a},
                            {"k", m.model.k},
                            {"c", m.model.c},
                            {"points", m.model.points},
                            {"max_batch", m.max_batch},
                            {"best_batch", m.best_batch},
                            {"predicted_peak_bytes", m.predicted_peak_bytes},
                            {"predicted_throughput", m.predicted_throughput},
                            {"note", m.note}});
  }
  j["recommended"] = a.recommended;
  j["reason"] = a.reason;
  if (!validation.empty()) {
    j["validation"] = nlohmann::json::array();
    for (const Validation& v : validation) {
      j["validation"].push_back({{"method", v.method},
                                 {"batch", v.batch},
                                 {"predicted_throughput", v.predicted_throughput},
                                 {"measured_throughput", v.measured_throughput},
                                 {"predicted_peak_bytes", v.predicted_peak_bytes},
                                 {"measured_peak_bytes", v.measured_peak_bytes},
                                 {"fits", v.fits}});
    }
  }
  return j;
}

// Measured points and each method's predicted curve, throughput over peak memory.
void plot_advice(const predict::Advice& a, const std::vector<predict::Measurement>& rows, const std::string& path,
                 const std::string& terminal) {
  std::string data, plot;
  int block = 0;
  for (const predict::MethodAdvice& m : a.methods) {
    const std::string measured = "$m" + std::to_string(block), predicted = "$p" + std::to_string(block);
    ++block;
    data += measured + " << EOD\n";
    for (const predict::Measurement& r : predict::rows_of(rows, m.method)) {
      data += format_number("%.6g", static_cast<double>(r.peak_bytes) / MiB) + " " +
              format_number("%.6g", static_cast<double>(r.batch) / r.step_seconds) + "\n";
    }
    data += "EOD\n" + predicted + " << EOD\n";
    const double top = static_cast<double>(std::max<std::int64_t>(m.max_batch, m.model.max_batch));
    for (int s = 0; s <= 60; ++s) {
      const double b = 1 + (top - 1) * s / 60.0;
      data += format_number("%.6g", m.model.peak_bytes(b) / MiB) + " " + format_number("%.6g", m.model.throughput(b)) +
              "\n";
    }
    data += "EOD\n";
    plot += (plot.empty() ? "plot " : ", ") + measured + " with points pt 7 lc " + std::to_string(block) + " title " +
            gnuplot_quote(m.method + " measured") + ", " + predicted + " with lines lc " + std::to_string(block) +
            " title " + gnuplot_quote(m.method + " predicted");
  }
  const double usable = static_cast<double>(a.usable_bytes) / MiB;
  const std::string script =
      terminal + data +
      "set key bottom right\nset grid\n"
      "set xlabel 'peak memory (MiB)'\nset ylabel 'throughput (samples/s)'\n"
      "set title " +
      gnuplot_quote("throughput against memory; usable device memory " + format_bytes(a.usable_bytes) +
                    (a.recommended.empty() ? "" : "; recommended: " + a.recommended)) +
      "\n" + "set arrow from " + format_number("%.6g", usable) + ", graph 0 to " + format_number("%.6g", usable) +
      ", graph 1 nohead dashtype 2 lc rgb 'gray30'\n" + plot + "\n";
  run_gnuplot(script);
  std::printf("wrote %s\n", path.c_str());
}

// advise's flags that a `profile --ranks` run takes too: the workload's and
// the profile's, without what advise or the run sets itself.
std::vector<std::string> profile_args_of(const std::vector<std::string>& args) {
  const std::vector<std::string> dropped_values{"device-memory", "headroom", "from-csv",    "csv",
                                                "json",          "plot",     "batch-limit", "ranks",
                                                "timeout",       "method",   "batches",     "threads"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--validate") continue;
    bool dropped = false;
    for (const std::string& name : dropped_values) {
      if (a == "--" + name) {
        ++i;
        dropped = true;
      } else if (a.rfind("--" + name + "=", 0) == 0) {
        dropped = true;
      }
    }
    if (!dropped) out.push_back(a);
  }
  return out;
}

std::vector<Validation> validate(const predict::Advice& a, const Workload& workload, const ProfileRequest& request) {
  std::vector<Validation> out;
  for (const predict::MethodAdvice& m : a.methods) {
    if (m.max_batch == 0) continue;
    std::optional<runtime::ProfileMethod> method;
    // The runnable methods with the checkpoint settings of the flags given.
    for (const runtime::ProfileMethod& r : request.methods) {
      if (r.name == m.method) method = r;
    }
    if (!method) {
      try {
        method = runtime::parse_profile_method(m.method, kDefaultCheckpointPlanner, std::nullopt);
      } catch (const UsageError& e) {
        std::fprintf(stderr, "memtrain: cannot validate %s: %s\n", m.method.c_str(), e.what());
        continue;
      }
    }
    const runtime::ProfilePoint p = runtime::profile_batch(
        *method, m.best_batch, workload.model_factory(),
        [&](std::int64_t batch) { return workload.batches(batch, request.options.seed); }, request.options);
    Validation v;
    v.method = m.method;
    v.batch = m.best_batch;
    v.predicted_throughput = m.predicted_throughput;
    v.measured_throughput = static_cast<double>(m.best_batch) / p.measurement.step_seconds;
    v.predicted_peak_bytes = m.predicted_peak_bytes;
    v.measured_peak_bytes = p.measurement.peak_bytes;
    v.fits = p.measurement.peak_bytes <= a.device_memory;  // the headroom is the prediction's margin
    out.push_back(v);
  }
  std::printf("\nvalidation: each method run at its predicted best batch; fits: measured peak <= device memory\n");
  std::printf("%-20s %9s %12s %12s %7s %12s %12s %7s %5s\n", "method", "batch", "pred samp/s", "meas samp/s", "error",
              "pred peak", "meas peak", "error", "fits");
  const Validation* best = nullptr;
  for (const Validation& v : out) {
    std::printf("%-20s %9lld %12.1f %12.1f %+6.1f%% %12s %12s %+6.1f%% %5s\n", v.method.c_str(),
                static_cast<long long>(v.batch), v.predicted_throughput, v.measured_throughput,
                100 * (v.predicted_throughput / v.measured_throughput - 1),
                format_bytes(static_cast<Bytes>(v.predicted_peak_bytes)).c_str(),
                format_bytes(v.measured_peak_bytes).c_str(),
                100 * (v.predicted_peak_bytes / static_cast<double>(v.measured_peak_bytes) - 1), v.fits ? "yes" : "no");
    if (v.fits && (!best || v.measured_throughput > best->measured_throughput)) best = &v;
  }
  if (best) {
    std::printf("measured best: %s (%s recommended)\n", best->method.c_str(),
                best->method == a.recommended ? "as" : ("advisor: " + a.recommended + " was").c_str());
  }
  return out;
}

}  // namespace

int run_advise(const std::vector<std::string>& args) {
  Flags flags(args, with_workload_switches({"help", "validate"}), "advise");
  if (flags.has("help")) {
    std::fputs(expand_help(kAdviseHelp).c_str(), stdout);
    return 0;
  }
  if (!flags.has("device-memory")) throw UsageError("advise: --device-memory is required, e.g. --device-memory 16GiB");
  predict::AdvisorOptions options;
  options.device_memory = parse_bytes(flags.text("device-memory", ""), "--device-memory");
  options.headroom = parse_headroom(flags.text("headroom", "10%"));
  options.batch_limit = flags.integer("batch-limit", options.batch_limit, 1, INT64_MAX / 2);
  const std::string from_csv = flags.text("from-csv", "");
  const std::string csv_path = flags.text("csv", "");
  const std::string json_path = flags.text("json", "");
  const std::string plot_path = flags.text("plot", "advise.svg");
  const std::string terminal = gnuplot_terminal(plot_path);  // reject a bad name before the work
  const bool run_validation = flags.has("validate");
  const bool measure_here = from_csv.empty();
  if (!measure_here && !csv_path.empty())
    throw UsageError("advise: --csv writes measurements taken here; not with --from-csv");
  std::optional<RankAdviceRequest> ranks;
  if (flags.has("ranks")) {
    if (!measure_here)
      throw UsageError("advise: --ranks measures the ranks' communication and the methods here; not with --from-csv");
    ranks.emplace();
    ranks->ranks = parse_rank_counts(flags.text("ranks", ""));
    ranks->timeout = flags.real("timeout", 60, 0.1, 86400);
    ranks->validate = run_validation;
    ranks->profile_args = profile_args_of(args);
  } else if (flags.has("timeout")) {
    throw UsageError("advise: --timeout is for ranks; give --ranks LIST");
  }
  const bool threads_given = flags.has("threads");
  const WorkloadFlags workload_flags = read_workload_flags(flags);
  std::optional<ProfileRequest> request;
  if (measure_here || run_validation) request = read_profile_flags(flags);
  if (ranks && !threads_given) {
    request->threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / ranks->ranks.back()));
  }
  flags.check_all_used();

  std::optional<Workload> workload;
  std::vector<predict::Measurement> rows;
  if (measure_here) {
    workload.emplace(workload_flags);
    for (const runtime::ProfilePoint& p : run_profile_sweep(*workload, *request)) rows.push_back(p.measurement);
    if (!csv_path.empty()) write_measurements_file(rows, csv_path);
  } else {
    rows = predict::read_measurements_csv_file(from_csv);
  }
  const predict::Advice advice = predict::advise(fit_methods(rows), options);
  print_advice(advice);
  std::vector<Validation> validation;
  if (run_validation) {
    if (!workload) workload.emplace(workload_flags);
    use_compute_threads(request->threads);  // as the sweep does, when there was none
    validation = validate(advice, *workload, *request);
  }
  nlohmann::json report = advice_json(advice, validation);
  if (ranks) {
    if (!workload) workload.emplace(workload_flags);
    report["ranks"] = advise_ranks(advice, *workload, *request, *ranks);
  }
  if (!json_path.empty()) write_json_file(report, json_path);
  plot_advice(advice, rows, plot_path, terminal);
  return 0;
}

}  // namespace memtrain::cli
