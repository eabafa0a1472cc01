// `memtrain train`: load a dataset, build a model, train it under a budget.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "cli/blas_library.h"
#include "cli/commands.h"
#include "cli/compute_threads.h"
#include "cli/flags.h"
#include "cli/help_text.h"
#include "cli/json_file.h"
#include "cli/planner_flags.h"
#include "cli/progress_bar.h"
#include "cli/rank_flags.h"
#include "cli/rank_launcher.h"
#include "cli/train_report.h"
#include "cli/workload_flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "data/partitioned_cache.h"
#include "plan/registry.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/link_calibration.h"
#include "runtime/training/shared_device.h"
#include "runtime/training/trainer.h"

namespace memtrain::cli {

namespace {

const char* kTrainHelp =
    "usage: memtrain train [flags]\n"
    "\n"
    "Trains a model under a device-memory budget. With no flags: the Transformer\n"
    "part-of-speech tagger on the Brown corpus, planner mimose, budget 50%, 40 steps.\n"
    "\n"
    "WORKLOAD"
    "  --budget B                   bytes (4096, 64KiB, 80MiB, 2GiB) or N% of the unconstrained\n"
    "                               peak of the dataset's largest batch (default 50%; 75% for resnet,\n"
    "                               whose largest block alone needs about 61% at 112 px)\n"
    "  --planner P                  PLANNERS (default mimose)\n"
    "  --slots N | --slot-bytes N   optimal: how finely memory is cut (default 500 slots; see memtrain plan --help)\n"
    "  --bandwidth BW               swap: the host link both ways, e.g. 25GB/s (or --d2h-bandwidth and\n"
    "                               --h2d-bandwidth); --calibration FILE takes them from `memtrain calibrate`;\n"
    "                               with neither, train measures the link at start as calibrate does\n"
    "  --fixed-link                 plan with that link all run; by default each step's own copies refine it\n"
    "  --weights-on host            weights, gradients and Adam state live in host memory and the\n"
    "                               schedule swaps them in (planners swap and swap-naive); N% budgets\n"
    "                               are then of one micro-batch's simulated step with all of it on the device\n"
    "  --micro-batches N            split each step into N micro-batches by rows: with --weights-on host\n"
    "                               for weight swapping, otherwise plain gradient accumulation\n"
    "  --steps N                    training steps (default 40)\n"
    "  --epochs N                   train N whole epochs instead of --steps\n"
    "  --batch N                    sentences or images per batch (default 32)\n"
    "  --seed N                     seed for weights, data order and dropout (default 1)\n"
    "  --json FILE                  write per-step records and a summary as JSON\n"
    "  --save-chain FILE            write the chain measured for the largest input (docs/chain-format.md)\n"
    "  --lr X                       Adam learning rate (default 0.001)\n"
    "  --collect-steps K            first K steps checkpoint everything while the predictor learns (default 4, 0..10)\n"
    "  --bucket N                   plan-cache bucket width in input size units (default: largest / 64)\n"
    "  --margin F                   memory safety margin for unseen sizes outside the observed range (default 0.10)\n"
    "  --no-enforce                 plan for the budget but do not enforce it (report violations instead)\n"
    "  --threads N                  CPU threads (default: all cores)\n"
    "  --device cpu|cuda[:N]        where to train (default cpu)\n"
    "  --quiet                      no progress bar\n"
    "  --share NAME                 join job group NAME (started by memtrain jobs): the device budget is\n"
    "                               the group's, each step's budget a lease from it (no --budget)\n"
    "  --share-label TEXT           how the group's messages name this job (memtrain jobs: \"job N\")\n"
    "\n"
    "RANKS (data parallelism on c10d with Gloo)\n"
    "  --ranks N                    start N ranks on this machine, meeting over loopback; --batch is\n"
    "                               per rank, and rank r takes the r-th slice of each global batch\n"
    "  --rank R --world N --master HOST:PORT\n"
    "                               one rank of a job started by hand or by a cluster's launcher, one\n"
    "                               per node; rank 0 serves the meeting point on HOST:PORT\n"
    "  --deterministic-reduce       sum the ranks' gradients in rank order: bit for bit one process\n"
    "                               with --micro-batches N on the N slices (default: Gloo's ring sum)\n"
    "  --partitioned-cache          with --data DIR --cache-policy minio --cache-size S: CoorDL's cache\n"
    "                               partitioned across the ranks; each rank caches its own seeded 1/N\n"
    "                               of the dataset and fetches the rest from its owner over TCP\n"
    "  --sum-gradients during|after during (default): each bucket of gradients is summed over the\n"
    "                               ranks as soon as the backward has made it final, beside the rest\n"
    "                               of the backward (the sums' copies take up to 1/32 of the budget;\n"
    "                               where even that leaves the largest input no plan, after); after:\n"
    "                               once the whole backward has run\n"
    "  --shard-optimizer            each rank keeps Adam's state for 1/N of the weights and updates\n"
    "                               those (ZeRO-1), then the ranks share the updated weights: bit for\n"
    "                               bit the unsharded result, with less memory per rank\n"
    "  --timeout S                  a rank that dies or hangs makes the others exit within 2 S,\n"
    "                               naming it (default 60)\n"
    "  Each rank plans its own steps under its own --budget; rank 0 prints the progress and the\n"
    "  summary and writes --json FILE, rank r > 0 writes FILE.rank<r>. --threads defaults to the\n"
    "  cores divided by the ranks on this machine.\n"
    "\n"
    "CHECKPOINTS\n"
    "  --checkpoint-dir D --checkpoint-every K\n"
    "                               every K steps write weights, Adam's state, the random generators\n"
    "                               and the data position to D (one file per rank, written then renamed)\n"
    "  --resume                     continue from D's checkpoint up to --steps in all: the result is\n"
    "                               bit for bit an uninterrupted run's\n"
    "\n"
    "GRAPHS\n"
    "  --model unet                 a U-Net labelling every pixel of Fashion-MNIST images with the\n"
    "                               garment's class (or background): a graph with long skips, not a\n"
    "                               chain; planned per input size by Checkmate's program solved with\n"
    "                               CBC (--planner checkmate, the default and only choice) and trained\n"
    "                               with that schedule; budgets N% are of keeping everything (default\n"
    "                               90%), enforced: a step that runs out retries under a stricter plan\n"
    "                               for its size. Its flags: --budget, --no-enforce, --steps, --batch,\n"
    "                               --seed, --lr, --threads, --device, --json, --quiet,\n"
    "                               --data-dir, --layers L (levels, default 2), --width N (default 16),\n"
    "                               --image-size PX (default 32), --time-limit S (CBC, default 60)\n";

// What `memtrain train` was asked, read from its flags and checked before
// any data loads or any rank starts.
struct TrainRequest {
  WorkloadFlags workload;
  runtime::TrainerOptions options;
  bool measure_link = false;  // the planner needs the host link and no flag gave it
  std::int64_t batch = 32, steps = 40, epochs = 0;
  RankFlags ranks;
  bool partitioned = false;
  int threads = 1;
  std::string device, json_path, chain_path, share, share_label, checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  bool resume = false, quiet = false;
};

// A mode in an error, with the flag that asks for it.
std::string mode_with_flag(runtime::TrainingMode mode) {
  using M = runtime::TrainingMode;
  const std::string words = runtime::mode_in_words(mode);
  switch (mode) {
    case M::Ranks: return words + " (--ranks, or --world)";
    case M::SharedDevice: return words + " (--share)";
    case M::WeightsOnHost: return words + " (--weights-on host)";
    case M::ShardOptimizer: return words + " (--shard-optimizer)";
    case M::DeterministicReduce: return words + " (--deterministic-reduce)";
    case M::Checkpoints: return words + " (--checkpoint-dir)";
  }
  return words;
}

// The Trainer's options: planner, budget, predictor, link.
void read_training_options(Flags& flags, TrainRequest& r) {
  runtime::TrainerOptions& options = r.options;
  options.steps.planner = flags.text("planner", "mimose");
  options.steps.planner_options = parse_planner_options(flags);
  const WeightFlags weights = parse_weight_flags(flags, true);
  options.weights_on_host = weights.on_host;
  options.micro_batches = weights.micro_batches;
  // A bad name or weight placement is refused before data loads.
  const plan::PlannerTraits& planner = plan::planner_traits(options.steps.planner);
  plan::check_planner_options(options.steps.planner_options);
  plan::check_weights_placement(options.steps.planner, weights.on_host, "--weights-on host");
  options.budget =
      parse_budget(flags.text("budget", r.workload.model.rfind("resnet", 0) == 0 ? "75%" : "50%"), "--budget");
  options.seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  options.steps.collect_steps =
      static_cast<int>(flags.integer("collect-steps", options.steps.collect_steps, 0, runtime::kMaxCollectSteps));
  options.steps.bucket = flags.integer("bucket", 0, 0, INT64_MAX);
  options.steps.margin = flags.real("margin", options.steps.margin, 0, runtime::kMaxMargin);
  options.adam.lr = flags.real("lr", options.adam.lr, 1e-9, 10);
  options.enforce = !flags.has("no-enforce");
  options.steps.refine_link = !flags.has("fixed-link");
  Chain calibrated;
  if (flags.has("calibration")) calibrated = read_chain_file(flags.text("calibration", ""));
  const LinkFlags link = parse_link_flags(flags);
  if (link.given() && !runtime::needs_host_link(planner, weights.on_host)) {
    throw UsageError(
        "train: the host link's bandwidth (--bandwidth, --d2h-bandwidth, --h2d-bandwidth) is for "
        "planners that copy to host memory (swap, tensile) or --weights-on host; planner " +
        options.steps.planner + " never copies, so it would be ignored");
  }
  link.apply(calibrated);
  options.steps.device_to_host_bandwidth = calibrated.device_to_host_bandwidth;
  options.steps.host_to_device_bandwidth = calibrated.host_to_device_bandwidth;
  // Plans that copy to the host need the link's bandwidth: measured here, as
  // `calibrate` does, when neither --bandwidth nor --calibration gives it.
  r.measure_link = runtime::needs_host_link(planner, options.weights_on_host) &&
                   !(options.steps.device_to_host_bandwidth > 0 && options.steps.host_to_device_bandwidth > 0);
}

// Ranks, sharing, checkpoints and reports; the rules between the modes.
void read_run_settings(Flags& flags, TrainRequest& r) {
  r.batch = flags.integer("batch", 32, 1, 65536);
  if (flags.has("steps") && flags.has("epochs")) throw UsageError("train: give --steps or --epochs, not both");
  r.steps = flags.integer("steps", 40, 1, INT64_MAX / 2);
  r.epochs = flags.integer("epochs", 0, 0, 100000);
  // Ranks: started here (--ranks), or this process is one (--rank/--world/--master).
  r.ranks = read_rank_flags(flags, "train");
  if (!r.ranks.ranked() && (flags.has("deterministic-reduce") || flags.has("shard-optimizer") || flags.has("timeout") ||
                            flags.has("sum-gradients") || flags.has("partitioned-cache"))) {
    throw UsageError(
        "train: --deterministic-reduce, --sum-gradients, --shard-optimizer, --partitioned-cache and --timeout are "
        "for ranks; give --ranks N or --rank/--world");
  }
  r.partitioned = flags.has("partitioned-cache");
  const WorkloadFlags& w = r.workload;
  if (r.partitioned && (w.data != "shards" || w.shards.coordinate || !w.shards.cache_size ||
                        w.shards.cache_policy != data::CachePolicy::minio)) {
    throw UsageError(
        "train: --partitioned-cache keeps each rank's part of packed shards and never evicts; give --data DIR, "
        "--cache-size S and --cache-policy minio, without --coordinate");
  }
  runtime::TrainerOptions& options = r.options;
  options.sum_beside_backward = flags.choice("sum-gradients", "during", {"during", "after"}) == "during";
  options.deterministic_reduce = flags.has("deterministic-reduce");
  options.shard_optimizer = flags.has("shard-optimizer");
  const int local_ranks = r.ranks.launch > 0 ? r.ranks.launch : 1;
  r.threads = static_cast<int>(flags.integer(
      "threads", std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(local_ranks)), 1, 1024));
  r.device = flags.text("device", "cpu");
  r.json_path = flags.text("json", "");
  r.chain_path = flags.text("save-chain", "");
  r.quiet = flags.has("quiet");
  r.share = flags.text("share", "");
  r.share_label = flags.text("share-label", "");
  if (r.share.empty() && !r.share_label.empty())
    throw UsageError("train: --share-label names a job of a group; give --share too");
  if (!r.share.empty() && flags.has("budget"))
    throw UsageError("train: --share takes the group's budget; give --budget to memtrain jobs, not here");
  r.checkpoint_dir = flags.text("checkpoint-dir", "");
  r.checkpoint_every = flags.integer("checkpoint-every", 0, 1, INT64_MAX);
  r.resume = flags.has("resume");
  if (r.checkpoint_dir.empty() && (r.checkpoint_every > 0 || r.resume))
    throw UsageError("train: --checkpoint-every and --resume need --checkpoint-dir D");
  runtime::TrainingModes modes = runtime::modes_of(options);
  modes.ranks = r.ranks.ranked();
  modes.shared_device = !r.share.empty();
  modes.checkpoints = !r.checkpoint_dir.empty();
  if (std::optional<runtime::ModeRule> rule = runtime::broken_mode_rule(modes))
    throw UsageError("train: " + runtime::describe(*rule, mode_with_flag));
  if (!r.checkpoint_dir.empty() && r.checkpoint_every == 0 && !r.resume) {
    throw UsageError("train: --checkpoint-dir " + r.checkpoint_dir +
                     " writes nothing and reads nothing alone; give --checkpoint-every K to write a checkpoint "
                     "every K steps, --resume to go on from one, or both");
  }
  options.checkpoints = modes.checkpoints;
}

// One process's run: the rank it is (0 of 1 without ranks), what it trains on.
struct TrainRun {
  explicit TrainRun(const TrainRequest& r) : request(r), options(r.options) {}
  const TrainRequest& request;
  runtime::TrainerOptions options;
  runtime::RankGroup* group = nullptr;
  int rank = 0, world = 1;
  bool speaks = true;  // rank 0 speaks for the job; the others report failures only
  std::unique_ptr<Workload> workload;
  std::unique_ptr<runtime::BatchSource> batches;
  std::unique_ptr<runtime::DeviceMemory> memory;
  std::unique_ptr<runtime::SharedDevice> shared;
  std::int64_t steps = 0;
};

// A job group's device: each step's budget is leased from it.
void join_group(TrainRun& run) {
  const TrainRequest& r = run.request;
  runtime::TrainerOptions& options = run.options;
  std::string label = r.workload.model + " " + options.steps.planner + " batch " + std::to_string(r.batch) + " seed " +
                      std::to_string(options.seed);
  if (!r.share_label.empty()) label = r.share_label + " (" + label + ")";
  try {
    run.shared = std::make_unique<runtime::SharedDevice>(r.share, *run.memory, label, 10.0);
    run.shared->check_planner(options.steps.planner);
    run.shared->set_start_wait([name = r.share, told = false](int calibrated, int expected, Seconds waited) mutable {
      if (!told && waited >= 5) {
        told = true;
        std::fprintf(stderr,
                     "memtrain: job group %s starts when its %d starting jobs have calibrated; %d have after %.0f s "
                     "(memtrain jobs --expect N hosts it for N)\n",
                     name.c_str(), expected, calibrated, waited);
      }
      return true;
    });
  } catch (const UsageError& e) {
    throw UsageError("train --share " + r.share + ": " + e.what() + "; start the group with memtrain jobs --name " +
                     r.share);
  }
  options.lease = run.shared.get();
}

void measure_host_link(TrainRun& run) {
  runtime::TrainerOptions& options = run.options;
  const runtime::LinkRates link =
      runtime::measure_link(*run.memory, runtime::kDefaultLinkCopyBytes, runtime::kDefaultLinkRepeats);
  if (!(options.steps.device_to_host_bandwidth > 0)) options.steps.device_to_host_bandwidth = link.device_to_host;
  if (!(options.steps.host_to_device_bandwidth > 0)) options.steps.host_to_device_bandwidth = link.host_to_device;
  if (run.speaks)
    std::fprintf(stderr, "memtrain: host link measured (no --bandwidth or --calibration): %s/s to host, %s/s back\n",
                 format_bytes(static_cast<Bytes>(options.steps.device_to_host_bandwidth)).c_str(),
                 format_bytes(static_cast<Bytes>(options.steps.host_to_device_bandwidth)).c_str());
}

// The data, the device, the group and the link this process trains with.
void set_up(TrainRun& run) {
  const TrainRequest& r = run.request;
  run.workload = std::make_unique<Workload>(r.workload);
  const Workload& workload = *run.workload;
  std::optional<runtime::ShardSourceOptions::Partition> partition;
  if (r.partitioned) {
    // Where the peers reach this rank: the address it reaches the store from.
    runtime::RankGroup* group = run.group;
    partition = runtime::ShardSourceOptions::Partition{
        data::local_address_towards(r.ranks.address.host), r.ranks.address.timeout,
        [group](const std::string& name, const std::string& text) { return group->exchange(name, text); }};
  }
  run.batches = run.group ? workload.rank_batches(r.batch, run.options.seed, run.group->rank(), run.world, partition)
                          : workload.batches(r.batch, run.options.seed);
  use_compute_threads(r.threads);
  run.steps = r.epochs > 0 ? r.epochs * run.batches->batches_per_epoch() : r.steps;
  run.memory = runtime::make_device_memory(r.device);
  if (!r.share.empty()) join_group(run);
  if (r.measure_link) measure_host_link(run);
}

// What the run is about to do, for people.
void announce(const TrainRun& run, const runtime::Trainer& trainer) {
  const TrainRequest& r = run.request;
  const runtime::TrainerOptions& options = run.options;
  std::string budget = format_bytes(trainer.budget_bytes());
  if (run.shared) {
    budget += " shared by job group " + r.share + ", leased step by step";
  } else if (options.budget.is_percent) {
    budget += " = " + options.budget.describe() + " of the unconstrained peak " +
              format_bytes(trainer.summary().reference_peak_bytes);
  }
  std::fprintf(stderr, "memtrain: largest input %s; budget %s (%s)\n", trainer.largest_signature().describe().c_str(),
               budget.c_str(), trainer.planner().respects_budget() && options.enforce ? "enforced" : "not enforced");
  if (run.group) {
    std::fprintf(stderr,
                 "memtrain: rank 0 of %d; each takes %lld of the %lld rows of a global batch; gradients summed %s, "
                 "%s\n",
                 run.world, static_cast<long long>(r.batch), static_cast<long long>(r.batch * run.world),
                 options.deterministic_reduce ? "in rank order (deterministic)" : "by Gloo's ring all-reduce",
                 trainer.sums_beside_backward() ? "bucket by bucket beside the backward"
                 : options.sum_beside_backward  ? "after the backward (the budget leaves no room beside it)"
                                                : "after the backward (--sum-gradients after)");
  }
  if (run.group && options.shard_optimizer) {
    std::fprintf(stderr, "memtrain: optimizer state sharded: this rank keeps %s of Adam's moments\n",
                 format_bytes(trainer.summary().optimizer_state_bytes).c_str());
  }
}

void announce_weights_on_host(const TrainRun& run, const runtime::Trainer& trainer) {
  std::fprintf(
      stderr,
      "memtrain: weights, gradients and Adam state in host memory (%s, %.2fx the budget); "
      "%d micro-batches per step\n",
      format_bytes(trainer.largest_chain().model_state_bytes()).c_str(),
      static_cast<double>(trainer.largest_chain().model_state_bytes()) / static_cast<double>(trainer.budget_bytes()),
      run.options.micro_batches);
}

// The steps, with the progress line and the checkpoints.
void train_steps(const TrainRun& run, runtime::Trainer& trainer, const std::string& checkpoint) {
  const TrainRequest& r = run.request;
  ProgressBar bar(stderr, run.steps);
  if (!r.quiet && run.speaks) trainer.on_step = [&](const runtime::StepRecord& rec) { bar.update(rec); };
  while (trainer.steps_done() < run.steps) {
    trainer.step();
    if (r.checkpoint_every > 0 && trainer.steps_done() % r.checkpoint_every == 0) trainer.save_checkpoint(checkpoint);
  }
  if (!r.quiet && run.speaks) bar.finish();
  if (run.shared) run.shared->finish();
}

// The summary lines rank 0 prints.
void print_summary(const TrainRun& run, const runtime::Trainer& trainer) {
  const runtime::TrainSummary sum = trainer.summary();
  std::printf(
      "memtrain: %ld steps, mean %.3f s/step; max peak %s of budget %s; %ld violations; %ld retries; "
      "plan cache %ld hits / %ld new; prediction error median %.2f%% max %.2f%%\n",
      sum.steps, sum.mean_step_seconds, format_bytes(sum.max_peak_bytes).c_str(),
      format_bytes(sum.budget_bytes).c_str(), sum.violations, sum.retries, sum.cache_hits, sum.cache_misses,
      100 * sum.median_prediction_error, 100 * sum.max_prediction_error);
  if (run.group) {
    const long planned = sum.steps - sum.collection_steps;
    std::printf(
        "memtrain: %d ranks; loss %.6f at the last step; summing gradients took %.3f s per planned step, %.1f%% "
        "of it hidden under the backward\n",
        run.world, trainer.records().empty() ? 0.0 : trainer.records().back().loss,
        planned > 0 ? sum.planned_reduce.seconds / static_cast<double>(planned) : 0.0,
        100 * sum.planned_reduce.hidden_fraction());
  }
  const CopyStats& copies = sum.planned_copies;
  if (copies.bytes() > 0) {
    const auto per_step = [&](Bytes b) { return format_bytes(static_cast<Bytes>(sum.per_planned_step(b))); };
    std::printf(
        "memtrain: swapped %s per planned step (%s to host, %s back; %s of it weights and gradients; "
        "%ld collection steps left out); %.1f%% of copy time hidden under compute (%.1f%% to host, %.1f%% "
        "back); simulated schedule time off by %.1f%% (median)\n",
        per_step(copies.bytes()).c_str(), per_step(copies.to_host_bytes).c_str(),
        per_step(copies.to_device_bytes).c_str(), per_step(copies.weight_bytes).c_str(), sum.collection_steps,
        100 * copies.hidden_fraction(), 100 * copies.hidden_fraction(CopyDirection::ToHost),
        100 * copies.hidden_fraction(CopyDirection::ToDevice), 100 * sum.median_time_prediction_error);
  }
}

// The input pipeline's counters (rank 0 prints its own) and the --json report.
void report(const TrainRun& run, const runtime::Trainer& trainer) {
  const TrainRequest& r = run.request;
  const runtime::TrainSummary sum = trainer.summary();
  nlohmann::json pipeline;
  // Every rank's report has its own pipeline's counters.
  if (const auto counters = run.batches->pipeline_counters()) {
    if (run.speaks) {
      std::printf("memtrain: input pipeline waited %.2f s of %.2f s (%.1f%%); %s\n", sum.data_wait_seconds,
                  sum.mean_step_seconds * static_cast<double>(sum.steps), 100 * sum.data_wait_fraction,
                  counters->summary.c_str());
      for (const std::string& note : counters->notes) std::printf("memtrain: %s\n", note.c_str());
    }
    pipeline = counters->fields;
  }
  if (r.json_path.empty()) return;
  const WorkloadFlags& w = r.workload;
  RunInfo info{w.model,
               w.shards.dir.empty() ? w.data : w.shards.dir,
               r.device,
               run.options.seed,
               pipeline,
               r.threads,
               blas_name(loaded_blas_library()),
               run.rank,
               run.world,
               run.options.deterministic_reduce,
               run.options.shard_optimizer};
  write_json_file(train_report(trainer, info),
                  run.rank > 0 ? r.json_path + ".rank" + std::to_string(run.rank) : r.json_path);
}

// This process's training, start to end.
void train_here(TrainRun& run) {
  const TrainRequest& r = run.request;
  set_up(run);
  runtime::Trainer trainer(run.options, *run.memory, run.workload->model_factory(), *run.batches);
  if (run.speaks)
    std::fprintf(stderr, "memtrain: %s; model %s (%lld parameters, %d stages); planner %s; device %s\n",
                 run.batches->describe().c_str(), r.workload.model.c_str(),
                 static_cast<long long>(trainer.model().parameter_count()), trainer.model().size(),
                 run.options.steps.planner.c_str(), run.memory->describe().c_str());
  const std::string checkpoint =
      r.checkpoint_dir.empty() ? "" : r.checkpoint_dir + "/memtrain-rank" + std::to_string(run.rank) + ".ckpt";
  if (!checkpoint.empty() && ::mkdir(r.checkpoint_dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("train: cannot make the checkpoint folder " + r.checkpoint_dir + ": " + std::strerror(errno));
  struct stat folder {};
  if (!checkpoint.empty() && (::stat(r.checkpoint_dir.c_str(), &folder) != 0 || !S_ISDIR(folder.st_mode))) {
    throw UsageError("train: --checkpoint-dir " + r.checkpoint_dir +
                     " is not a folder; give a folder (memtrain makes it when it does not exist)");
  }
  if (r.resume) {
    trainer.resume(checkpoint);
    if (run.speaks)
      std::fprintf(stderr, "memtrain: resumed from %s after step %lld\n", checkpoint.c_str(),
                   static_cast<long long>(trainer.steps_done()));
  }
  trainer.calibrate();
  if (run.speaks) announce(run, trainer);
  if (run.options.weights_on_host) announce_weights_on_host(run, trainer);
  if (!r.chain_path.empty()) write_chain_file(trainer.largest_chain(), r.chain_path);
  train_steps(run, trainer, checkpoint);
  if (run.speaks) print_summary(run, trainer);
  report(run, trainer);
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  Flags flags(args,
              with_workload_switches({"help", "quiet", "no-enforce", "fixed-link", "deterministic-reduce",
                                      "partitioned-cache", "shard-optimizer", "launched", "resume"}),
              "train");
  if (flags.has("help")) {
    std::fputs(expand_help(kTrainHelp).c_str(), stdout);
    return 0;
  }
  if (flags.text("model", "transformer") == "unet") return run_graph_train(flags);
  TrainRequest request;
  request.workload = read_workload_flags(flags);
  read_training_options(flags, request);
  read_run_settings(flags, request);
  flags.check_all_used();
  if (request.ranks.launch > 0) {
    std::vector<std::string> rank_args = args_without_ranks(args);
    // Each rank's share of the cores, unless the flags say otherwise.
    if (!flags.has("threads")) {
      rank_args.push_back("--threads");
      rank_args.push_back(std::to_string(request.threads));
    }
    return launch_ranks({"train"}, rank_args, request.ranks.launch, request.ranks.address.timeout);
  }
  TrainRun run(request);
  std::unique_ptr<runtime::RankGroup> group;
  if (request.ranks.by_hand) {
    group = std::make_unique<runtime::RankGroup>(request.ranks.address);
    run.group = run.options.ranks = group.get();
    run.rank = group->rank();
    run.world = group->world();
    run.speaks = run.rank == 0;
  }
  // A rank that fails says why, so the others name it and its reason.
  const std::string who = "rank " + std::to_string(request.ranks.address.rank) + ": ";
  try {
    train_here(run);
    return 0;
  } catch (const runtime::RankFailure&) {
    throw;
  } catch (const UsageError& e) {
    if (group) group->fail(who + e.what());
    throw;
  } catch (const std::exception& e) {
    if (!group) throw;
    group->fail(who + e.what());
    throw Error(who + e.what());
  }
}

}  // namespace memtrain::cli
