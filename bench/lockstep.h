// What the benchmarks share: trainers of several planners stepping in
// lockstep on the same batches (one step each in turn, so machine noise hits
// them alike and ratios compare like with like), and the report plumbing.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/batch_source.h"
#include "runtime/device_memory.h"
#include "runtime/trainer.h"

namespace memtrain::bench {

struct LaneResult {
  bool feasible = true;
  std::string why;  // when infeasible: the trainer's reason
  runtime::TrainSummary summary;
  std::vector<runtime::StepRecord> records;
  int collect_steps = 0;

  // Mean wall time of the steps after the collection phase, s.
  double mean_step() const;
  double max_peak_over_budget() const;
  double cache_hit_rate() const;
};

// One trainer with what it needs kept alive beside it.
struct Lane {
  std::unique_ptr<runtime::CpuDeviceMemory> memory;
  std::unique_ptr<runtime::BatchSource> source;
  std::unique_ptr<runtime::Trainer> trainer;
};

// Builds the lane of one planner; `options` already names the planner and budget.
using LaneFactory = std::function<Lane(const runtime::TrainerOptions& options)>;

// Every planner at `budget` (e.g. "50%"), `steps` steps each in lockstep.
// A planner whose calibration fails (budget below its minimum) is reported
// infeasible with the trainer's reason.
std::map<std::string, LaneResult> run_lockstep(const std::vector<std::string>& planners, const std::string& budget,
                                               int steps, const LaneFactory& make, const std::string& label);

std::string machine();  // CPU model, cores, LibTorch version
std::string today();    // YYYY-MM-DD, UTC
std::string fmt(const char* format, double value);
// A benchmark's main: runs `run` on the arguments; a UsageError exits 2 and
// any other error 1, each printed after the benchmark's name.
int bench_main(const char* name, int (*run)(const std::vector<std::string>&), int argc, char** argv);

// Replaces the section between <!-- NAME:begin --> and <!-- NAME:end --> in
// `path` (appending it when absent), keeping the rest of the file.
void write_section(const std::string& path, const std::string& name, const std::string& report);

}  // namespace memtrain::bench
