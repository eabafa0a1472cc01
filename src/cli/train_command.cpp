// `memtrain train`: load a dataset, build a model, train it under a budget.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
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
#include "cli/shared_device.h"
#include "cli/train_report.h"
#include "cli/workload_flags.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "data/partitioned_cache.h"
#include "plan/registry.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/link_calibration.h"
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
    "                               90%), not enforced (violations are reported). Its flags: --budget,\n"
    "                               --steps, --batch, --seed, --lr, --threads, --device, --json, --quiet,\n"
    "                               --data-dir, --layers L (levels, default 2), --width N (default 16),\n"
    "                               --image-size PX (default 32), --time-limit S (CBC, default 60)\n";

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
  const WorkloadFlags workload_flags = read_workload_flags(flags);
  const std::string& model = workload_flags.model;
  runtime::TrainerOptions options;
  options.planner = flags.text("planner", "mimose");
  options.planner_options = parse_planner_options(flags);
  const WeightFlags weights = parse_weight_flags(flags, true);
  options.weights_on_host = weights.on_host;
  options.micro_batches = weights.micro_batches;
  // A bad name or weight placement is refused before data loads.
  plan::check_weights_placement(*plan::make_planner(options.planner, options.planner_options), weights.on_host,
                                "--weights-on host");
  options.budget = parse_budget(flags.text("budget", model == "resnet" ? "75%" : "50%"), "--budget");
  options.seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  options.collect_steps =
      static_cast<int>(flags.integer("collect-steps", options.collect_steps, 0, runtime::kMaxCollectSteps));
  options.bucket = flags.integer("bucket", 0, 0, INT64_MAX);
  options.margin = flags.real("margin", options.margin, 0, runtime::kMaxMargin);
  options.adam.lr = flags.real("lr", options.adam.lr, 1e-9, 10);
  options.enforce = !flags.has("no-enforce");
  options.refine_link = !flags.has("fixed-link");
  Chain calibrated;
  if (flags.has("calibration")) calibrated = read_chain_file(flags.text("calibration", ""));
  parse_link_flags(flags).apply(calibrated);
  options.device_to_host_bandwidth = calibrated.device_to_host_bandwidth;
  options.host_to_device_bandwidth = calibrated.host_to_device_bandwidth;
  // Swapping plans with the host link's bandwidth: measured here, as
  // `calibrate` does, when neither --bandwidth nor --calibration gives it.
  const bool measure_link = (options.planner == "swap" || options.planner == "tensile" || options.weights_on_host) &&
                            !(options.device_to_host_bandwidth > 0 && options.host_to_device_bandwidth > 0);
  const std::int64_t batch = flags.integer("batch", 32, 1, 65536);
  if (flags.has("steps") && flags.has("epochs")) throw UsageError("train: give --steps or --epochs, not both");
  std::int64_t steps = flags.integer("steps", 40, 1, INT64_MAX / 2);
  const std::int64_t epochs = flags.integer("epochs", 0, 0, 100000);
  // Ranks: started here (--ranks), or this process is one (--rank/--world/--master).
  const RankFlags rank_flags = read_rank_flags(flags, "train");
  const int launch = rank_flags.launch;
  const bool by_hand = rank_flags.by_hand;
  runtime::RankAddress address = rank_flags.address;
  const bool ranked = rank_flags.ranked();
  if (!ranked && (flags.has("deterministic-reduce") || flags.has("shard-optimizer") || flags.has("timeout") ||
                  flags.has("sum-gradients") || flags.has("partitioned-cache"))) {
    throw UsageError(
        "train: --deterministic-reduce, --sum-gradients, --shard-optimizer, --partitioned-cache and --timeout are "
        "for ranks; give --ranks N or --rank/--world");
  }
  const bool partitioned = flags.has("partitioned-cache");
  if (partitioned &&
      (workload_flags.data != "shards" || workload_flags.shards.coordinate || !workload_flags.shards.cache_size ||
       workload_flags.shards.cache_policy != data::CachePolicy::minio)) {
    throw UsageError(
        "train: --partitioned-cache keeps each rank's part of packed shards and never evicts; give --data DIR, "
        "--cache-size S and --cache-policy minio, without --coordinate");
  }
  options.sum_beside_backward = flags.choice("sum-gradients", "during", {"during", "after"}) == "during";
  options.deterministic_reduce = flags.has("deterministic-reduce");
  options.shard_optimizer = flags.has("shard-optimizer");
  const int local_ranks = launch > 0 ? launch : 1;
  const int threads = static_cast<int>(flags.integer(
      "threads", std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(local_ranks)), 1, 1024));
  const std::string device = flags.text("device", "cpu");
  const std::string json_path = flags.text("json", "");
  const std::string chain_path = flags.text("save-chain", "");
  const bool quiet = flags.has("quiet");
  const std::string share = flags.text("share", "");
  const std::string share_label = flags.text("share-label", "");
  if (share.empty() && !share_label.empty())
    throw UsageError("train: --share-label names a job of a group; give --share too");
  if (!share.empty() && flags.has("budget"))
    throw UsageError("train: --share takes the group's budget; give --budget to memtrain jobs, not here");
  const std::string checkpoint_dir = flags.text("checkpoint-dir", "");
  const std::int64_t checkpoint_every = flags.integer("checkpoint-every", 0, 1, INT64_MAX);
  const bool resume = flags.has("resume");
  if (checkpoint_dir.empty() && (checkpoint_every > 0 || resume))
    throw UsageError("train: --checkpoint-every and --resume need --checkpoint-dir D");
  if (!checkpoint_dir.empty() && weights.on_host)
    throw UsageError("train: checkpoints keep the weights on the device; --weights-on host is not supported with them");
  if (ranked && !share.empty()) throw UsageError("train: ranks cannot join a job group (--share)");
  if (weights.on_host && flags.has("shard-optimizer")) {
    throw UsageError(
        "train: --shard-optimizer with --weights-on host is not supported (the host updates each stage whole); "
        "keep the weights on the device to shard the optimizer");
  }
  flags.check_all_used();
  if (launch > 0) {
    std::vector<std::string> rank_args = args_without_ranks(args);
    // Each rank's share of the cores, unless the flags say otherwise.
    if (!flags.has("threads")) {
      rank_args.push_back("--threads");
      rank_args.push_back(std::to_string(threads));
    }
    return launch_ranks({"train"}, rank_args, launch, address.timeout);
  }
  std::unique_ptr<runtime::RankGroup> group;
  if (by_hand) {
    group = std::make_unique<runtime::RankGroup>(address);
    options.ranks = group.get();
  }
  // A rank that fails says why, so the others name it and its reason.
  try {
    const Workload workload(workload_flags);
    const int world = group ? group->world() : 1;
    std::optional<runtime::ShardSourceOptions::Partition> partition;
    if (partitioned) {
      // Where the peers reach this rank: the address it reaches the store from.
      partition = runtime::ShardSourceOptions::Partition{
          data::local_address_towards(address.host), address.timeout,
          [&](const std::string& name, const std::string& text) { return group->exchange(name, text); }};
    }
    std::unique_ptr<runtime::BatchSource> batches =
        group ? workload.rank_batches(batch, options.seed, group->rank(), world, partition)
              : workload.batches(batch, options.seed);
    const int rank = group ? group->rank() : 0;
    const bool speaks = rank == 0;  // rank 0 speaks for the job; the others report failures only

    use_compute_threads(threads);
    if (epochs > 0) steps = epochs * batches->batches_per_epoch();
    std::unique_ptr<runtime::DeviceMemory> memory = runtime::make_device_memory(device);
    std::unique_ptr<SharedDevice> shared;
    if (!share.empty()) {
      std::string label =
          model + " " + options.planner + " batch " + std::to_string(batch) + " seed " + std::to_string(options.seed);
      if (!share_label.empty()) label = share_label + " (" + label + ")";
      shared = std::make_unique<SharedDevice>(share, *memory, device, label, 10.0);
      if (shared->policy() == jobs::Policy::Tensile && options.planner != "tensile") {
        throw UsageError("train: job group " + share +
                         " shares its budget by the tensile policy, whose jobs plan with --planner tensile; got "
                         "--planner " +
                         options.planner);
      }
      options.lease = shared.get();
    }
    if (measure_link) {
      const runtime::LinkRates link =
          runtime::measure_link(*memory, runtime::kDefaultLinkCopyBytes, runtime::kDefaultLinkRepeats);
      if (!(options.device_to_host_bandwidth > 0)) options.device_to_host_bandwidth = link.device_to_host;
      if (!(options.host_to_device_bandwidth > 0)) options.host_to_device_bandwidth = link.host_to_device;
      if (speaks)
        std::fprintf(stderr,
                     "memtrain: host link measured (no --bandwidth or --calibration): %s/s to host, %s/s back\n",
                     format_bytes(static_cast<Bytes>(options.device_to_host_bandwidth)).c_str(),
                     format_bytes(static_cast<Bytes>(options.host_to_device_bandwidth)).c_str());
    }
    runtime::Trainer trainer(options, *memory, workload.model_factory(), *batches);
    if (speaks)
      std::fprintf(stderr, "memtrain: %s; model %s (%lld parameters, %d stages); planner %s; device %s\n",
                   batches->describe().c_str(), model.c_str(),
                   static_cast<long long>(trainer.model().parameter_count()), trainer.model().size(),
                   options.planner.c_str(), memory->describe().c_str());
    const std::string checkpoint =
        checkpoint_dir.empty() ? "" : checkpoint_dir + "/memtrain-rank" + std::to_string(rank) + ".ckpt";
    if (!checkpoint.empty() && ::mkdir(checkpoint_dir.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error("train: cannot make the checkpoint folder " + checkpoint_dir + ": " + std::strerror(errno));
    if (resume) {
      trainer.resume(checkpoint);
      if (speaks)
        std::fprintf(stderr, "memtrain: resumed from %s after step %lld\n", checkpoint.c_str(),
                     static_cast<long long>(trainer.steps_done()));
    }
    trainer.calibrate();
    std::string budget = format_bytes(trainer.budget_bytes());
    if (shared) {
      budget += " shared by job group " + share + ", leased step by step";
    } else if (options.budget.is_percent) {
      budget += " = " + options.budget.describe() + " of the unconstrained peak " +
                format_bytes(trainer.summary().reference_peak_bytes);
    }
    if (speaks)
      std::fprintf(stderr, "memtrain: largest input %s; budget %s (%s)\n",
                   trainer.largest_signature().describe().c_str(), budget.c_str(),
                   trainer.planner().respects_budget() && options.enforce ? "enforced" : "not enforced");
    if (group && speaks) {
      std::fprintf(stderr,
                   "memtrain: rank 0 of %d; each takes %lld of the %lld rows of a global batch; gradients summed %s, "
                   "%s\n",
                   group->world(), static_cast<long long>(batch), static_cast<long long>(batch * group->world()),
                   options.deterministic_reduce ? "in rank order (deterministic)" : "by Gloo's ring all-reduce",
                   trainer.sums_beside_backward() ? "bucket by bucket beside the backward"
                   : options.sum_beside_backward  ? "after the backward (the budget leaves no room beside it)"
                                                  : "after the backward (--sum-gradients after)");
    }
    if (group && speaks && options.shard_optimizer) {
      std::fprintf(stderr, "memtrain: optimizer state sharded: this rank keeps %s of Adam's moments\n",
                   format_bytes(trainer.summary().optimizer_state_bytes).c_str());
    }
    if (options.weights_on_host) {
      std::fprintf(stderr,
                   "memtrain: weights, gradients and Adam state in host memory (%s, %.2fx the budget); "
                   "%d micro-batches per step\n",
                   format_bytes(trainer.largest_chain().model_state_bytes()).c_str(),
                   static_cast<double>(trainer.largest_chain().model_state_bytes()) /
                       static_cast<double>(trainer.budget_bytes()),
                   options.micro_batches);
    }
    if (!chain_path.empty()) write_chain_file(trainer.largest_chain(), chain_path);

    ProgressBar bar(stderr, steps);
    if (!quiet && speaks) trainer.on_step = [&](const runtime::StepRecord& r) { bar.update(r); };
    while (trainer.steps_done() < steps) {
      trainer.step();
      if (checkpoint_every > 0 && trainer.steps_done() % checkpoint_every == 0) trainer.save_checkpoint(checkpoint);
    }
    if (!quiet && speaks) bar.finish();
    if (shared) shared->finish();

    const runtime::TrainSummary sum = trainer.summary();
    if (speaks)
      std::printf(
          "memtrain: %ld steps, mean %.3f s/step; max peak %s of budget %s; %ld violations; %ld retries; "
          "plan cache %ld hits / %ld new; prediction error median %.2f%% max %.2f%%\n",
          sum.steps, sum.mean_step_seconds, format_bytes(sum.max_peak_bytes).c_str(),
          format_bytes(sum.budget_bytes).c_str(), sum.violations, sum.retries, sum.cache_hits, sum.cache_misses,
          100 * sum.median_prediction_error, 100 * sum.max_prediction_error);
    if (group && speaks) {
      const long planned = sum.steps - sum.collection_steps;
      std::printf(
          "memtrain: %d ranks; loss %.6f at the last step; summing gradients took %.3f s per planned step, %.1f%% "
          "of it hidden under the backward\n",
          world, trainer.records().empty() ? 0.0 : trainer.records().back().loss,
          planned > 0 ? sum.planned_reduce.seconds / static_cast<double>(planned) : 0.0,
          100 * sum.planned_reduce.hidden_fraction());
    }
    const CopyStats& copies = sum.planned_copies;
    if (copies.bytes() > 0 && speaks) {
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
    nlohmann::json pipeline;
    // Every rank's report has its own pipeline's counters; rank 0 prints its own.
    if (const auto counters = batches->pipeline_counters()) {
      if (speaks) {
        std::printf("memtrain: input pipeline waited %.2f s of %.2f s (%.1f%%); %s\n", sum.data_wait_seconds,
                    sum.mean_step_seconds * static_cast<double>(sum.steps), 100 * sum.data_wait_fraction,
                    counters->summary.c_str());
        for (const std::string& note : counters->notes) std::printf("memtrain: %s\n", note.c_str());
      }
      pipeline = counters->fields;
    }
    if (!json_path.empty()) {
      RunInfo info{model,
                   workload_flags.shards.dir.empty() ? workload_flags.data : workload_flags.shards.dir,
                   device,
                   options.seed,
                   pipeline,
                   threads,
                   blas_name(loaded_blas_library()),
                   rank,
                   world,
                   options.deterministic_reduce,
                   options.shard_optimizer};
      write_json_file(train_report(trainer, info), rank > 0 ? json_path + ".rank" + std::to_string(rank) : json_path);
    }
    return 0;
  } catch (const runtime::RankFailure&) {
    throw;
  } catch (const UsageError& e) {
    if (group) group->fail("rank " + std::to_string(address.rank) + ": " + e.what());
    throw;
  } catch (const std::exception& e) {
    if (!group) throw;
    const std::string why = "rank " + std::to_string(address.rank) + ": " + e.what();
    group->fail(why);
    throw Error(why);
  }
}

}  // namespace memtrain::cli
