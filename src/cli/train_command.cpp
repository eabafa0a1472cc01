// `memtrain train`: load a dataset, build a model, train it under a budget.
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

#include <ATen/Parallel.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/planner_flags.h"
#include "cli/progress_bar.h"
#include "cli/train_report.h"
#include "core/chain_json.h"
#include "core/error.h"
#include "data/brown_corpus.h"
#include "data/fashion_mnist.h"
#include "data/tagging_dataset.h"
#include "plan/registry.h"
#include "runtime/brown_batches.h"
#include "runtime/device_memory.h"
#include "runtime/fashion_mnist_batches.h"
#include "runtime/models/model_registry.h"
#include "runtime/trainer.h"

namespace memtrain::cli {

namespace {

const char* kTrainHelp =
    "usage: memtrain train [flags]\n"
    "\n"
    "Trains a model under a device-memory budget. With no flags: the Transformer\n"
    "part-of-speech tagger on the Brown corpus, planner mimose, budget 50%, 40 steps.\n"
    "\n"
    "  --model transformer|resnet   model (default transformer)\n"
    "  --data brown|fashion-mnist   dataset (default: brown for transformer, fashion-mnist for resnet)\n"
    "  --data-dir DIR               dataset directory (default: where scripts/install-deps.sh puts it)\n"
    "  --budget B                   bytes (4096, 64KiB, 80MiB, 2GiB) or N% of the unconstrained\n"
    "                               peak of the dataset's largest batch (default 50%; 75% for resnet,\n"
    "                               whose largest block alone needs about 61% at 112 px)\n"
    "  --planner P                  PLANNERS (default mimose)\n"
    "  --slots N | --slot-bytes N   optimal: how finely memory is cut (default 500 slots; see memtrain plan --help)\n"
    "  --steps N                    training steps (default 40)\n"
    "  --epochs N                   train N whole epochs instead of --steps\n"
    "  --batch N                    sentences or images per batch (default 32)\n"
    "  --seed N                     seed for weights, data order and dropout (default 1)\n"
    "  --json FILE                  write per-step records and a summary as JSON\n"
    "  --save-chain FILE            write the chain measured for the largest input (docs/chain-format.md)\n"
    "  --layers N --width N --heads N --dropout P   model size (see docs/usage.md)\n"
    "  --lr X                       Adam learning rate (default 0.001)\n"
    "  --vocab N                    Brown: most frequent words kept (default 10000)\n"
    "  --min-scale PX --max-scale PX  Fashion-MNIST: range of per-batch image sizes (default 28..112)\n"
    "  --collect-steps K            first K steps checkpoint everything while the predictor learns (default 4, 0..10)\n"
    "  --bucket N                   plan-cache bucket width in input size units (default: largest / 64)\n"
    "  --margin F                   memory safety margin for unseen sizes outside the observed range (default 0.10)\n"
    "  --no-enforce                 plan for the budget but do not enforce it (report violations instead)\n"
    "  --threads N                  CPU threads (default: all cores)\n"
    "  --device cpu|cuda[:N]        where to train (default cpu)\n"
    "  --quiet                      no progress bar\n";

struct Dataset {
  std::shared_ptr<const data::TaggingDataset> tagging;
  std::shared_ptr<const data::ImageDataset> images;
  std::unique_ptr<runtime::BatchSource> batches;
  runtime::DataShape shape;
};

Dataset load_dataset(const std::string& name, Flags& flags, std::int64_t batch, std::uint64_t seed) {
  Dataset d;
  const std::string dir = flags.text("data-dir", "");
  if (name == "brown") {
    const std::int64_t vocab = flags.integer("vocab", 10000, 3, 10000000);
    const data::BrownCorpus corpus = data::read_brown_corpus(data::find_brown_directory(dir));
    d.tagging = std::make_shared<data::TaggingDataset>(data::make_tagging_dataset(corpus, vocab));
    d.shape.vocabulary = d.tagging->words.size();
    d.shape.classes = d.tagging->tags.size();
    d.shape.max_length = d.tagging->max_length;
    d.batches = std::make_unique<runtime::BrownBatches>(d.tagging, batch, seed);
  } else {
    const std::int64_t min_scale = flags.integer("min-scale", 28, 8, 1024);
    const std::int64_t max_scale = flags.integer("max-scale", 112, 8, 1024);
    d.images = std::make_shared<data::ImageDataset>(
        data::read_fashion_mnist(data::find_fashion_mnist_directory(dir), "train"));
    d.shape.classes = d.images->classes;
    d.shape.in_channels = 1;
    d.batches = std::make_unique<runtime::FashionMnistBatches>(d.images, batch, min_scale, max_scale, seed);
  }
  return d;
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  Flags flags(args, {"help", "quiet", "no-enforce"}, "train");
  if (flags.has("help")) {
    std::fputs(help_with_planners(kTrainHelp).c_str(), stdout);
    return 0;
  }
  const std::string model = flags.choice("model", "transformer", runtime::model_names());
  const std::string data_name =
      flags.choice("data", model == "transformer" ? "brown" : "fashion-mnist", {"brown", "fashion-mnist"});
  if ((model == "transformer") != (data_name == "brown")) {
    throw UsageError("--model " + model + " does not fit --data " + data_name +
                     "; expected transformer with brown, resnet with fashion-mnist");
  }
  runtime::TrainerOptions options;
  options.planner = flags.text("planner", "mimose");
  options.planner_options = parse_planner_options(flags);
  plan::make_planner(options.planner, options.planner_options);  // reject a bad name before loading data
  options.budget = parse_budget(flags.text("budget", model == "resnet" ? "75%" : "50%"), "--budget");
  options.seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  options.collect_steps = static_cast<int>(flags.integer("collect-steps", options.collect_steps, 0, 10));
  options.bucket = flags.integer("bucket", 0, 0, INT64_MAX);
  options.margin = flags.real("margin", options.margin, 0, 10);
  options.adam.lr = flags.real("lr", options.adam.lr, 1e-9, 10);
  options.enforce = !flags.has("no-enforce");
  const std::int64_t batch = flags.integer("batch", 32, 1, 65536);
  if (flags.has("steps") && flags.has("epochs")) throw UsageError("train: give --steps or --epochs, not both");
  std::int64_t steps = flags.integer("steps", 40, 1, INT64_MAX / 2);
  const std::int64_t epochs = flags.integer("epochs", 0, 0, 100000);
  runtime::ModelSpec spec;
  spec.layers = flags.integer("layers", -1, 0, 256);
  spec.width = flags.integer("width", -1, 1, 8192);
  spec.heads = flags.integer("heads", -1, 1, 1024);
  spec.dropout = flags.real("dropout", -1, 0, 0.99);
  const int threads = static_cast<int>(flags.integer(
      "threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  const std::string device = flags.text("device", "cpu");
  const std::string json_path = flags.text("json", "");
  const std::string chain_path = flags.text("save-chain", "");
  const bool quiet = flags.has("quiet");
  Dataset dataset = load_dataset(data_name, flags, batch, options.seed);
  flags.check_all_used();

  at::set_num_threads(threads);
  if (epochs > 0) steps = epochs * dataset.batches->batches_per_epoch();
  std::unique_ptr<runtime::DeviceMemory> memory = runtime::make_device_memory(device);
  const runtime::DataShape shape = dataset.shape;
  runtime::Trainer trainer(options, *memory,
                           [&] { return runtime::make_model(model, spec, shape); }, *dataset.batches);
  std::fprintf(stderr, "memtrain: %s; model %s (%lld parameters, %d stages); planner %s; device %s\n",
               dataset.batches->describe().c_str(), model.c_str(),
               static_cast<long long>(trainer.model().parameter_count()), trainer.model().size(),
               options.planner.c_str(), memory->describe().c_str());
  trainer.calibrate();
  std::string budget = format_bytes(trainer.budget_bytes());
  if (options.budget.is_percent) {
    budget += " = " + options.budget.describe() + " of the unconstrained peak " +
              format_bytes(trainer.summary().reference_peak_bytes);
  }
  std::fprintf(stderr, "memtrain: largest input %s; budget %s (%s)\n", trainer.largest_signature().describe().c_str(),
               budget.c_str(), trainer.planner().respects_budget() && options.enforce ? "enforced" : "not enforced");
  if (!chain_path.empty()) write_chain_file(trainer.largest_chain(), chain_path);

  ProgressBar bar(stderr, steps);
  if (!quiet) trainer.on_step = [&](const runtime::StepRecord& r) { bar.update(r); };
  for (std::int64_t s = 0; s < steps; ++s) trainer.step();
  if (!quiet) bar.finish();

  const runtime::TrainSummary sum = trainer.summary();
  std::printf(
      "memtrain: %ld steps, mean %.3f s/step; max peak %s of budget %s; %ld violations; %ld retries; "
      "plan cache %ld hits / %ld new; prediction error median %.2f%% max %.2f%%\n",
      sum.steps, sum.mean_step_seconds, format_bytes(sum.max_peak_bytes).c_str(),
      format_bytes(sum.budget_bytes).c_str(), sum.violations, sum.retries, sum.cache_hits, sum.cache_misses,
      100 * sum.median_prediction_error, 100 * sum.max_prediction_error);
  if (!json_path.empty()) {
    RunInfo info{model, data_name, device, options.seed};
    std::ofstream out(json_path);
    if (!out) throw Error("--json: cannot write '" + json_path + "'");
    out << train_report(trainer, info).dump(2) << "\n";
  }
  return 0;
}

}  // namespace memtrain::cli
