// `memtrain train --model unet`: a model that is not a chain, trained with
// the graph planner (Checkmate's program, solved with CBC) through
// runtime::GraphTrainer.
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/compute_threads.h"
#include "cli/flags.h"
#include "cli/json_file.h"
#include "core/error.h"
#include "data/fashion_mnist.h"
#include "runtime/builtin_models/unet.h"
#include "runtime/input/fashion_mnist_batches.h"
#include "runtime/memory/device_memory.h"
#include "runtime/training/graph_trainer.h"

namespace memtrain::cli {

namespace {

// A new input size's plan, against keeping everything. The graph planner
// predicts nothing per size: each new size is measured before it is planned.
void print_new_plan(const runtime::GraphTrainer& trainer, const std::string& size, Seconds planning_seconds,
                    const BudgetSpec& budget) {
  const plan::GraphPlan& p = trainer.plan();
  const plan::GraphCost& keep = trainer.keep_everything();
  std::fprintf(stderr,
               "memtrain: input %s: budget %s (%s of the largest input's step keeping everything, %s); plan peak "
               "%s, time %.4f s against %.4f s keeping everything (%+.1f%%), %s; measured and planned in %.2f s\n",
               size.c_str(), format_bytes(trainer.budget_bytes()).c_str(), budget.describe().c_str(),
               format_bytes(trainer.reference_peak_bytes()).c_str(), format_bytes(p.cost.peak_bytes).c_str(),
               p.cost.time, keep.time, 100 * (p.cost.time / keep.time - 1),
               p.proven_optimal ? "proven optimal" : "the best CBC found in the time limit", planning_seconds);
}

nlohmann::json graph_step_json(const runtime::StepRecord& last) {
  return {{"step", last.step},
          {"size", last.signature.describe()},
          {"new_plan", last.plan == runtime::PlanKind::New},
          {"loss", last.loss},
          {"accuracy", last.accuracy},
          {"peak_bytes", last.peak_bytes},
          {"planned_peak_bytes", last.predicted_peak_bytes},
          {"budget_bytes", last.budget_bytes},
          {"violation", last.violation},
          {"retries", last.retries},
          {"recomputed", last.recomputed_forwards},
          {"seconds", last.seconds},
          {"planning_seconds", last.planning_seconds}};
}

void print_graph_step(const runtime::StepRecord& last, std::int64_t steps) {
  std::fprintf(stderr,
               "step %lld/%lld loss %.4f acc %5.1f%% peak %s (planned %s) / budget %s, %d recomputed, %d retries, "
               "%.3fs\n",
               static_cast<long long>(last.step), static_cast<long long>(steps), last.loss, 100 * last.accuracy,
               format_bytes(last.peak_bytes).c_str(), format_bytes(last.predicted_peak_bytes).c_str(),
               format_bytes(last.budget_bytes).c_str(), last.recomputed_forwards, last.retries, last.seconds);
}

// What a run of `steps` steps added up to.
struct GraphRunTotals {
  std::int64_t steps = 0;
  double seconds = 0;
  Bytes max_peak = 0;
  long violations = 0;
};

nlohmann::json graph_report(const runtime::GraphTrainer& trainer, const std::string& device, std::uint64_t seed,
                            nlohmann::json records, const GraphRunTotals& t) {
  return {{"model", "unet"},
          {"planner", "checkmate"},
          {"device", device},
          {"seed", seed},
          {"steps", std::move(records)},
          {"summary",
           {{"steps", t.steps},
            {"mean_step_seconds", t.seconds / static_cast<double>(t.steps)},
            {"max_peak_bytes", t.max_peak},
            {"budget_bytes", trainer.budget_bytes()},
            {"keep_everything_peak_bytes", trainer.keep_everything().peak_bytes},
            {"reference_peak_bytes", trainer.reference_peak_bytes()},
            {"per_size_prediction", false},  // each new size is measured before it is planned
            {"planned_peak_bytes", trainer.plan().cost.peak_bytes},
            {"proven_optimal", trainer.plan().proven_optimal},
            {"enforced", trainer.enforced()},
            {"retries", trainer.retries()},
            {"violations", t.violations}}}};
}

}  // namespace

int run_graph_train(Flags& flags) {
  const std::string planner = flags.text("planner", "checkmate");
  if (planner != "checkmate") {
    throw UsageError(
        "train: --model unet is a graph, not a chain; it is planned by the graph planner: "
        "expected --planner checkmate, not '" +
        planner + "'");
  }
  runtime::GraphTrainerOptions options;
  options.budget = parse_budget(flags.text("budget", "90%"), "--budget");
  options.time_limit = flags.real("time-limit", 60, 0.1, 86400);
  options.enforce = !flags.has("no-enforce");
  options.adam.lr = flags.real("lr", options.adam.lr, 1e-9, 10);
  runtime::UNetSpec spec;
  spec.levels = flags.integer("layers", 2, 1, 6);
  spec.width = flags.integer("width", 16, 1, 4096);
  const std::int64_t image = flags.integer("image-size", 32, 8, 4096);
  if (image % (std::int64_t{1} << spec.levels) != 0) {
    throw UsageError("train: --image-size " + std::to_string(image) + " must be divisible by 2^" +
                     std::to_string(spec.levels) + " (one halving per level of --layers)");
  }
  const std::int64_t batch = flags.integer("batch", 32, 1, 65536);
  const std::int64_t steps = flags.integer("steps", 40, 1, INT64_MAX / 2);
  const auto seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  const int threads =
      static_cast<int>(flags.integer("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  const std::string device = flags.text("device", "cpu");
  const std::string data_dir = flags.text("data-dir", "");
  const std::string json_path = flags.text("json", "");
  const bool quiet = flags.has("quiet");
  flags.check_all_used();

  use_compute_threads(threads);
  auto data = std::make_shared<const data::ImageDataset>(
      data::read_fashion_mnist(data::find_fashion_mnist_directory(data_dir), "train"));
  spec.classes = data->classes;
  runtime::FashionMnistBatches batches(data, batch, image, image, seed);
  std::unique_ptr<runtime::DeviceMemory> memory = runtime::make_device_memory(device);
  std::unique_ptr<runtime::GraphModel> model;
  {
    auto scope = memory->activate();
    torch::manual_seed(seed);
    model = std::make_unique<runtime::GraphModel>(runtime::make_unet(spec));
  }
  runtime::GraphTrainer trainer(options, *memory, std::move(model), batches);
  std::fprintf(stderr,
               "memtrain: %s; model unet (%lld parameters, %d nodes, %d in the training graph); planner "
               "checkmate (CBC); device %s\n",
               batches.describe().c_str(), static_cast<long long>(trainer.model().parameter_count()),
               trainer.model().size(), 2 * trainer.model().size(), memory->describe().c_str());
  print_new_plan(trainer, trainer.largest().size, trainer.largest().planning_seconds, options.budget);

  nlohmann::json records = nlohmann::json::array();
  long violations = 0;
  double seconds = 0;
  Bytes max_peak = 0;
  runtime::StepRecord last;
  for (std::int64_t s = 0; s < steps; ++s) {
    last = trainer.step();
    if (last.plan == runtime::PlanKind::New)
      print_new_plan(trainer, last.signature.describe(), last.planning_seconds, options.budget);
    if (!quiet) print_graph_step(last, steps);
    violations += last.violation;
    seconds += last.seconds;
    max_peak = std::max(max_peak, last.peak_bytes);
    records.push_back(graph_step_json(last));
  }
  std::printf(
      "memtrain: %lld steps, mean %.3f s/step; max peak %s of budget %s (%s); %ld violations, %ld retries; "
      "last loss %.4f, pixel accuracy %.1f%%\n",
      static_cast<long long>(steps), seconds / static_cast<double>(steps), format_bytes(max_peak).c_str(),
      format_bytes(trainer.budget_bytes()).c_str(), trainer.enforced() ? "enforced" : "not enforced", violations,
      trainer.retries(), last.loss, 100 * last.accuracy);
  if (!json_path.empty()) {
    const GraphRunTotals totals{steps, seconds, max_peak, violations};
    write_json_file(graph_report(trainer, device, seed, std::move(records), totals), json_path);
  }
  return 0;
}

}  // namespace memtrain::cli
