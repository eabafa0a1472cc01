// The plain LibTorch loop over a built-in model and its batches, as
// `memtrain train` would train them (the same model, data, batch size,
// seed and Adam), without memtrain: each stage's forward with autograd,
// the loss, its backward and Adam's update, reading the loss once a step as
// a training loop that prints it does. Its mean step time is what
// `memtrain train --planner none` is compared with (scripts/gpu-check.sh).
//
//   plain_loop_bench [--device cuda] [--batch 32] [--steps 80] [--seed 1]
//                    [--lr X] [the workload flags of `memtrain train`]
//
// Prints one line: device, batch, steps, mean_step_seconds (every step, as
// `memtrain train` averages them), and the mean loss.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/workload_flags.h"
#include "core/error.h"
#include "core/seconds_since.h"
#include "runtime/memory/device_memory.h"
#include "runtime/model/adam.h"
#include "runtime/model/step_context.h"

namespace memtrain::bench {
namespace {

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, cli::with_workload_switches({}), "plain_loop_bench");
  const std::string device = flags.text("device", "cpu");
  const std::int64_t batch = flags.integer("batch", 32, 1, 1 << 20);
  const std::int64_t steps = flags.integer("steps", 80, 1, 1 << 30);
  const std::uint64_t seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, 1LL << 62));
  runtime::AdamOptions adam;
  adam.lr = flags.real("lr", adam.lr, 1e-9, 10);
  const cli::WorkloadFlags workload_flags = cli::read_workload_flags(flags);
  flags.check_all_used();

  const cli::Workload workload(workload_flags);
  std::unique_ptr<runtime::DeviceMemory> memory = runtime::make_device_memory(device);
  const auto scope = memory->activate();
  std::unique_ptr<runtime::BatchSource> source = workload.batches(batch, seed);
  runtime::StagedModel model = workload.model_factory()();
  model.to(memory->device());
  runtime::Adam optimizer(model.parameters(), adam);
  at::Generator generator = memory->make_generator(seed);

  double seconds = 0, loss_sum = 0;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const runtime::Batch b = source->next(memory->device());
    runtime::StepContext ctx;
    ctx.targets = b.targets;
    ctx.key_padding = b.key_padding;
    ctx.generator = generator;
    torch::Tensor x = b.input;
    for (int i = 0; i < model.size(); ++i) x = model.stage(i).forward(x, ctx);
    x.backward();
    optimizer.step();
    optimizer.zero_grad();
    loss_sum += x.item<double>();  // waits for the step, as a loop that prints its loss does
    seconds += seconds_since(t0);
  }
  std::printf("plain loop: device %s batch %lld steps %lld mean_step_seconds %.6f mean_loss %.4f\n",
              memory->describe().c_str(), static_cast<long long>(batch), static_cast<long long>(steps),
              seconds / static_cast<double>(steps), loss_sum / static_cast<double>(steps));
  return 0;
}

}  // namespace
}  // namespace memtrain::bench

int main(int argc, char** argv) {
  try {
    return memtrain::bench::run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const memtrain::UsageError& e) {
    std::cerr << e.what() << "\n";  // names the command already
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "plain_loop_bench: " << e.what() << "\n";
    return 1;
  }
}
