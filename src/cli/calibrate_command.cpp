// `memtrain calibrate`: the costs the Simulator prices schedules with, measured
// on this machine: each stage's times and memory at the dataset's largest
// input (the trainer's own measurement) and the host link's bandwidth each
// way. Written as a chain file that `simulate`, `plan` and
// `train --calibration` read.
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/compute_threads.h"
#include "cli/flags.h"
#include "cli/help_text.h"
#include "cli/json_file.h"
#include "cli/workload_flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "runtime/execution/host_weights.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/link_calibration.h"
#include "runtime/training/trainer.h"

namespace memtrain::cli {

namespace {

const char* kCalibrateHelp =
    "usage: memtrain calibrate --json FILE [flags]\n"
    "\n"
    "Measures, on this machine, what the Simulator needs to price a schedule with offload:\n"
    "each stage's forward and backward time and memory at the dataset's largest batch, and\n"
    "the bandwidth of copies device -> host and host -> device, and an optimizer step's time on the\n"
    "host per stage (for weights kept there). Writes them as a chain file\n"
    "(docs/chain-format.md) for memtrain simulate --chain, plan --chain and train --calibration.\n"
    "\n"
    "WORKLOAD"
    "  --json FILE                  where to write the chain (required)\n"
    "  --batch N                    sentences or images per batch (default 32)\n"
    "  --copy-bytes SIZE            bytes per timed copy (default 64MiB)\n"
    "  --repeats N                  timed copies each way (default 5; the median counts)\n"
    "  --threads N                  CPU threads (default: all cores)\n"
    "  --device cpu|cuda[:N]        where to measure (default cpu)\n";

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
  Flags flags(args, with_workload_switches({"help"}), "calibrate");
  if (flags.has("help")) {
    std::fputs(expand_help(kCalibrateHelp).c_str(), stdout);
    return 0;
  }
  if (!flags.has("json")) throw UsageError("calibrate: --json FILE is required; see memtrain calibrate --help");
  const WorkloadFlags workload_flags = read_workload_flags(flags);
  const std::string json_path = flags.text("json", "");
  const std::int64_t batch = flags.integer("batch", 32, 1, 65536);
  const Bytes copy_bytes = flags.has("copy-bytes") ? parse_bytes(flags.text("copy-bytes", ""), "--copy-bytes")
                                                   : runtime::kDefaultLinkCopyBytes;
  const int repeats = static_cast<int>(flags.integer("repeats", runtime::kDefaultLinkRepeats, 1, 1000));
  const int threads =
      static_cast<int>(flags.integer("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  const std::string device = flags.text("device", "cpu");
  flags.check_all_used();
  if (copy_bytes < 1024)
    throw UsageError("--copy-bytes " + std::to_string(copy_bytes) + " is too small; expected at least 1KiB");

  use_compute_threads(threads);
  const Workload workload(workload_flags);
  runtime::TrainerOptions options;
  options.steps.planner = "none";
  options.budget = {true, 100.0, 0};
  std::unique_ptr<runtime::BatchSource> batches = workload.batches(batch, options.seed);
  std::unique_ptr<runtime::DeviceMemory> memory = runtime::make_device_memory(device);
  runtime::Trainer trainer(options, *memory, workload.model_factory(), *batches);
  trainer.calibrate();
  const runtime::LinkRates link = runtime::measure_link(*memory, copy_bytes, repeats);

  Chain chain = trainer.largest_chain();
  chain.device_to_host_bandwidth = link.device_to_host;
  chain.host_to_device_bandwidth = link.host_to_device;
  // What an optimizer step costs on the host, for weights kept there.
  const double update_rate = runtime::Adam::measure_host_seconds_per_byte();
  for (Stage& s : chain.stages) s.update_time = update_rate * static_cast<double>(s.grad_bytes);
  // Where the trainer will run those updates (HostWeights' default).
  chain.updates_inline = runtime::HostWeights::updates_inline_on(*memory);
  nlohmann::json j = chain_to_json(chain);
  j["device"] = memory->describe();
  j["largest_input_shape"] = trainer.largest_signature().shape;
  j["copy_bytes"] = link.bytes;
  j["copy_repeats"] = link.repeats;
  write_json_file(j, json_path);
  std::printf(
      "memtrain: %s; %d stages at input %s: forward %.4g s, backward %.4g s; copies of %s: %s/s to host, "
      "%s/s back; wrote %s\n",
      memory->describe().c_str(), chain.size(), trainer.largest_signature().describe().c_str(), chain.forward_time(),
      chain.backward_time(), format_bytes(link.bytes).c_str(),
      format_bytes(static_cast<Bytes>(link.device_to_host)).c_str(),
      format_bytes(static_cast<Bytes>(link.host_to_device)).c_str(), json_path.c_str());
  return 0;
}

}  // namespace memtrain::cli
