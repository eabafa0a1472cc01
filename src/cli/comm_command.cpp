// `memtrain comm bench`: what a data-parallel step's communication costs on
// these ranks: all-reduces by size and by how many tensors carry the bytes,
// the small gathers each step makes, how much slower the ranks compute at
// once, and the fitted all-reduce model `advise --ranks` uses.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/compute_threads.h"
#include "cli/flags.h"
#include "cli/json_file.h"
#include "cli/rank_flags.h"
#include "cli/rank_launcher.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "predict/all_reduce_model.h"
#include "runtime/comm/collective_bench.h"

namespace memtrain::cli {

namespace {

const char* kCommHelp =
    "usage: memtrain comm bench (--ranks N | --rank R --world N --master HOST:PORT) [flags]\n"
    "\n"
    "Measures, over the ranks, the communication of a data-parallel step as `train` does it:\n"
    "all-reduces (a sum over the ranks, float32) of each size split in each number of tensors,\n"
    "the small gather each step makes twice, and how much slower the ranks compute when they\n"
    "all compute at once than one at a time. Fits seconds = latency + per_tensor*tensors +\n"
    "seconds_per_byte*bytes to the all-reduces. Rank 0 prints and writes the report.\n"
    "\n"
    "  --ranks N                    start N ranks on this machine, meeting over loopback\n"
    "  --rank R --world N --master HOST:PORT\n"
    "                               be rank R of N; rank 0 serves the store at HOST:PORT\n"
    "  --sizes LIST                 bytes per all-reduce, comma-separated (default 256KiB,2MiB,8MiB,32MiB)\n"
    "  --tensors LIST               tensors the bytes are split in, comma-separated (default 1,32)\n"
    "  --repeats N                  timed all-reduces per size and split; the median counts (default 7)\n"
    "  --compute-seconds S          seconds of matrix products per rank alone (default 0.3)\n"
    "  --threads N                  CPU threads per rank (default: cores divided by the ranks here)\n"
    "  --timeout S                  a rank that does not answer within S seconds is named (default 60)\n"
    "  --json FILE                  write the report as JSON\n";

std::vector<Bytes> parse_size_list(const std::string& text) {
  std::vector<Bytes> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const Bytes b = parse_bytes(item, "--sizes '" + text + "'");
    if (b < 4) throw UsageError("--sizes '" + text + "': '" + item + "' is below 4 bytes (one float)");
    out.push_back(b);
  }
  if (out.empty()) throw UsageError("--sizes is empty; expected sizes, e.g. 1MiB,8MiB");
  return out;
}

std::vector<std::int64_t> parse_tensor_counts(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::int64_t v = parse_whole_integer(item).value_or(0);
    if (v < 1 || v > 100000)
      throw UsageError("--tensors '" + text + "': '" + item + "' is not a count; expected whole numbers 1..100000");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--tensors is empty; expected counts, e.g. 1,32");
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int run_comm_bench(const std::vector<std::string>& args) {
  Flags flags(args, {"help", "launched"}, "comm bench");
  if (flags.has("help")) {
    std::fputs(kCommHelp, stdout);
    return 0;
  }
  const std::vector<Bytes> sizes = parse_size_list(flags.text("sizes", "256KiB,2MiB,8MiB,32MiB"));
  const std::vector<std::int64_t> splits = parse_tensor_counts(flags.text("tensors", "1,32"));
  const int repeats = static_cast<int>(flags.integer("repeats", 7, 1, 10000));
  const double compute_seconds = flags.real("compute-seconds", 0.3, 0.01, 600);
  const std::string json_path = flags.text("json", "");
  const RankFlags ranks = read_rank_flags(flags, "comm bench");
  if (!ranks.ranked())
    throw UsageError("comm bench measures ranks; give --ranks N or --rank R --world N --master HOST:PORT");
  const int local_ranks = ranks.launch > 0 ? ranks.launch : 1;
  const int threads = static_cast<int>(flags.integer(
      "threads", std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(local_ranks)), 1, 1024));
  flags.check_all_used();
  if (ranks.launch > 0)
    return launch_ranks({"comm", "bench"}, args_without_ranks(args), ranks.launch, ranks.address.timeout);

  use_compute_threads(threads);
  runtime::RankGroup group(ranks.address);
  try {
    const runtime::ComputeSlowdown compute = runtime::measure_compute_slowdown(group, compute_seconds);
    const std::vector<Seconds> gathers = runtime::time_small_gather(group, repeats);
    std::vector<predict::AllReducePoint> points;
    nlohmann::json rows = nlohmann::json::array();
    for (Bytes bytes : sizes) {
      for (std::int64_t tensors : splits) {
        const std::vector<Seconds> times = runtime::time_all_reduce(group, bytes, tensors, repeats);
        points.push_back({bytes, tensors, median_of(times)});
        rows.push_back(
            {{"bytes", bytes}, {"tensors", tensors}, {"seconds", points.back().seconds}, {"repeats", times}});
      }
    }
    if (group.rank() > 0) return 0;
    const predict::AllReduceModel fit = predict::fit_all_reduce_model(points, group.world());
    std::printf("%d ranks, %d compute threads each\n", group.world(), threads);
    std::printf("%12s %8s %12s %12s\n", "bytes", "tensors", "seconds", "GB/s");
    for (const predict::AllReducePoint& p : points) {
      std::printf("%12s %8lld %12.6f %12.3f\n", format_bytes(p.bytes).c_str(), static_cast<long long>(p.tensors),
                  p.seconds, static_cast<double>(p.bytes) / p.seconds / 1e9);
    }
    std::printf("small gather: %.6f s (median)\n", median_of(gathers));
    std::printf("compute: %.6f s per product alone, %.6f s all ranks at once: %.2fx slower\n", compute.alone,
                compute.together, compute.slowdown());
    std::printf("fit: latency %.6f s + %.6f s per tensor + bytes / %.3f GB/s (R2 %.4f)\n", fit.latency, fit.per_tensor,
                fit.bandwidth() / 1e9, fit.r2);
    if (!json_path.empty()) {
      write_json_file({{"ranks", group.world()},
                       {"threads", threads},
                       {"all_reduce", rows},
                       {"small_gather_seconds", median_of(gathers)},
                       {"compute",
                        {{"alone_seconds", compute.alone},
                         {"together_seconds", compute.together},
                         {"slowdown", compute.slowdown()}}},
                       {"fit",
                        {{"latency", fit.latency},
                         {"per_tensor", fit.per_tensor},
                         {"seconds_per_byte", fit.seconds_per_byte},
                         {"r2", fit.r2}}}},
                      json_path);
    }
    return 0;
  } catch (const runtime::RankFailure&) {
    throw;
  } catch (const std::exception& e) {
    const std::string why = "rank " + std::to_string(group.rank()) + ": " + e.what();
    group.fail(why);
    throw Error(why);
  }
}

}  // namespace

int run_comm(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kCommHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "bench") throw UsageError("comm: unknown subcommand '" + args[0] + "'; known: bench");
  return run_comm_bench(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace memtrain::cli
