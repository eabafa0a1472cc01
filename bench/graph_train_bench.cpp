// The graph planner measured: the U-Net (`memtrain train --model unet`) trained
// under several budgets, one GraphTrainer per budget stepping in lockstep on
// the same batches from the same weights. For each: what CBC planned (peak,
// time over keeping everything, proven optimal or not) against what the step
// measured, and whether every lane trained to the same losses.
//
//   build/bench/graph_train_bench [--steps N (60)] [--budgets 100,90,85,80] [--out docs/BENCHMARKS.md]
#include <ATen/Parallel.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "bench/lockstep.h"
#include "cli/flags.h"
#include "core/error.h"
#include "core/seconds_since.h"
#include "data/fashion_mnist.h"
#include "runtime/builtin_models/unet.h"
#include "runtime/input/fashion_mnist_batches.h"
#include "runtime/model/adam.h"
#include "runtime/training/graph_trainer.h"

namespace memtrain::bench {

namespace {

struct GraphLane {
  std::string budget;
  std::unique_ptr<runtime::CpuDeviceMemory> memory;
  std::unique_ptr<runtime::FashionMnistBatches> batches;
  std::unique_ptr<runtime::GraphTrainer> trainer;
  std::vector<runtime::StepRecord> records;
};

// The same model trained by one autograd pass through the whole network, no
// graph schedule: what keeping everything should cost.
struct AutogradLane {
  std::unique_ptr<runtime::CpuDeviceMemory> memory;
  std::unique_ptr<runtime::FashionMnistBatches> batches;
  std::unique_ptr<runtime::GraphModel> model;
  std::unique_ptr<runtime::Adam> adam;
  std::vector<double> losses;
  Bytes peak = 0;

  double step() {
    auto scope = memory->activate();
    const runtime::Batch batch = batches->next(memory->device());
    runtime::StepContext ctx;
    ctx.targets = batch.targets;
    memory->reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    {
      const torch::Tensor loss = model->forward(batch.input, ctx);
      losses.push_back(loss.item<double>());
      loss.backward();
    }
    adam->step();
    adam->zero_grad();
    const double seconds = seconds_since(t0);
    peak = std::max(peak, memory->peak());
    return seconds;
  }
};

// One GraphTrainer per budget, each with its own memory, batches and the same first weights.
std::vector<GraphLane> graph_lanes(const std::shared_ptr<const data::ImageDataset>& data,
                                   const std::vector<std::string>& budgets, const runtime::UNetSpec& spec,
                                   std::int64_t batch, std::int64_t image) {
  std::vector<GraphLane> lanes;
  for (const std::string& b : budgets) {
    GraphLane lane;
    lane.budget = b;
    lane.memory = std::make_unique<runtime::CpuDeviceMemory>();
    lane.batches = std::make_unique<runtime::FashionMnistBatches>(data, batch, image, image, 1);
    std::unique_ptr<runtime::GraphModel> model;
    {
      auto scope = lane.memory->activate();
      torch::manual_seed(1);
      model = std::make_unique<runtime::GraphModel>(runtime::make_unet(spec));
    }
    runtime::GraphTrainerOptions options;
    options.budget = parse_budget(b, "--budgets");
    lane.trainer = std::make_unique<runtime::GraphTrainer>(options, *lane.memory, std::move(model), *lane.batches);
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

// Every lane's timed steps (the autograd lane's last).
std::vector<std::vector<double>> take_turns(std::vector<GraphLane>& lanes, AutogradLane& autograd, int steps) {
  // Lanes take turns in rounds of kRound steps (steps of some 60 ms: a lane
  // switch every step measured the switch, not the schedule), in ABBA
  // order round by round; a round's first step is not timed.
  constexpr int kRound = 5;
  // The autograd lane takes its turn as lane number lanes.size().
  std::vector<std::vector<double>> timed(lanes.size() + 1);
  std::vector<size_t> all(lanes.size() + 1);
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  for (int s = 0; s < steps; s += kRound) {
    for (const size_t which : abba_order(all, s / kRound)) {
      for (int r = 0; r < kRound && s + r < steps; ++r) {
        double seconds = 0;
        if (which == lanes.size()) {
          seconds = autograd.step();
        } else {
          lanes[which].records.push_back(lanes[which].trainer->step());
          seconds = lanes[which].records.back().seconds;
        }
        if (r > 0 && s + r > 0) timed[which].push_back(seconds);
      }
    }
    std::fprintf(stderr, "\rgraph_train_bench: step %d/%d", std::min(s + kRound, steps), steps);
  }
  std::fprintf(stderr, "\n");
  return timed;
}

struct LaneChecks {
  bool same_losses = true;  // every lane's losses the first lane's
  bool within = true;       // every lane's peak within its budget
};

// One row per budget: the plan against the measured peak and step.
LaneChecks write_lanes(std::ostringstream& md, const std::vector<GraphLane>& lanes,
                       const std::vector<std::vector<double>>& timed) {
  LaneChecks c;
  bool &same_losses = c.same_losses, &within = c.within;
  const GraphLane& keep = lanes.front();
  char line[600];
  for (const GraphLane& lane : lanes) {
    const plan::GraphPlan& p = lane.trainer->plan();
    // Priced on the lane's own measured graph: each lane measured its own times.
    const plan::GraphCost& keep_cost = lane.trainer->keep_everything();
    Bytes peak = 0;
    for (const auto& r : lane.records) peak = std::max(peak, r.peak_bytes);
    for (size_t k = 0; k < lane.records.size(); ++k)
      same_losses = same_losses && lane.records[k].loss == keep.records[k].loss;
    within = within && peak <= lane.trainer->budget_bytes();
    std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %+.1f%% | %.3f | %d | %s |\n", lane.budget.c_str(),
                  format_bytes(lane.trainer->budget_bytes()).c_str(), format_bytes(p.cost.peak_bytes).c_str(),
                  format_bytes(peak).c_str(), 100 * (p.cost.time / keep_cost.time - 1),
                  median(timed[&lane - &lanes[0]]) / median(timed[0]), lane.records.back().recomputed_forwards,
                  p.proven_optimal ? "proven optimal" : "time limit");
    md << line;
  }
  return c;
}

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "graph_train_bench");
  const int steps = static_cast<int>(flags.integer("steps", 60, 3, 100000));
  const std::vector<std::string> budgets = percent_budgets(flags.text("budgets", "100,90,85,80"));
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();
  at::set_num_threads(1);
  // glibc adapts its mmap and trim thresholds to the process's history, which
  // the lanes share: fixed, a lane's large blocks come from the heap every
  // step instead of fresh pages on some steps and not others.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  auto data = std::make_shared<const data::ImageDataset>(
      data::read_fashion_mnist(data::find_fashion_mnist_directory(""), "train"));
  const std::int64_t batch = 32, image = 32;
  runtime::UNetSpec spec;
  spec.classes = data->classes;
  std::vector<GraphLane> lanes = graph_lanes(data, budgets, spec, batch, image);
  AutogradLane autograd;
  autograd.memory = std::make_unique<runtime::CpuDeviceMemory>();
  autograd.batches = std::make_unique<runtime::FashionMnistBatches>(data, batch, image, image, 1);
  {
    auto scope = autograd.memory->activate();
    torch::manual_seed(1);
    autograd.model = std::make_unique<runtime::GraphModel>(runtime::make_unet(spec));
    autograd.adam = std::make_unique<runtime::Adam>(autograd.model->parameters(), runtime::GraphTrainerOptions().adam);
  }
  const std::vector<std::vector<double>> timed = take_turns(lanes, autograd, steps);

  // Step 1 measures and plans; times are over the rest.
  const GraphLane& keep = lanes.front();
  std::ostringstream md;
  char line[600];
  md << "## The graph planner measured: training the U-Net under a budget\n\n"
     << "Command: `build/bench/graph_train_bench --steps " << steps << "` (or `scripts/bench.sh graph-train`)  \n"
     << "Machine: " << machine() << "; date " << today() << "; 1 compute thread  \n";
  std::snprintf(
      line, sizeof line,
      "Model: `memtrain train --model unet` at its defaults (2 levels, width 16, %d nodes, %d in the training "
      "graph), batch %lld Fashion-MNIST images at %lld px, every pixel labelled. One trainer per budget, "
      "taking turns in rounds of 5 steps on the same batches from the same weights; budgets are of the "
      "priced peak of keeping everything on the measured graph (%s). Step 1 measures the graph and plans "
      "(CBC, 60 s limit); step times are medians over each round's steps after its first, of %d steps "
      "in all.\n\n",
      keep.trainer->model().size(), 2 * keep.trainer->model().size(), static_cast<long long>(batch),
      static_cast<long long>(image), format_bytes(keep.trainer->keep_everything().peak_bytes).c_str(), steps);
  md << line;
  md << "| budget | bytes | planned peak | measured peak | planned time over keeping everything | median step / "
        "first lane's | nodes recomputed per step | CBC |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  const LaneChecks checks = write_lanes(md, lanes, timed);
  const bool same_losses = checks.same_losses, within = checks.within;
  std::snprintf(line, sizeof line,
                "\n- Losses equal, bit for bit, in every lane at every step: %s (first %.4f, last %.4f).\n",
                same_losses ? "yes" : "no", keep.records.front().loss, keep.records.back().loss);
  md << line;
  bool autograd_losses = true;
  for (size_t k = 0; k < autograd.losses.size(); ++k)
    autograd_losses = autograd_losses && autograd.losses[k] == keep.records[k].loss;
  std::snprintf(line, sizeof line,
                "- One autograd pass through the whole network, no schedule, in the same rounds: median step %.3f of "
                "the first lane's, peak %s; losses bit-equal to the first lane's at every step: %s. Each node's "
                "backward reads its inputs and output (the graph program's node model) and runs the kernels autograd "
                "would without running its forward again; it rebuilds what its convolution reads (pooled, or "
                "upsampled and joined with the skip), which autograd keeps.\n",
                median(timed.back()) / median(timed[0]), format_bytes(autograd.peak).c_str(),
                autograd_losses ? "yes" : "no");
  md << line;
  md << "\n### Measured\n\n";
  target_line(md, same_losses, "every budget trains to the same losses as keeping everything");
  target_line(md, within, "every step's measured peak within its budget");
  target_line(md, autograd_losses, "keeping everything trains to the same losses as one autograd pass");
  publish("graph_train_bench", md.str(), out);
  return 0;
}

}  // namespace

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("graph_train_bench", memtrain::bench::run, argc, argv);
}
