// What the benchmarks share: trainers of several planners stepping in
// lockstep on the same batches (one step each in turn, so machine noise hits
// them alike and ratios compare like with like), and the report plumbing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "data/tagging_dataset.h"
#include "runtime/input/batch_source.h"
#include "runtime/memory/device_memory.h"
#include "runtime/training/trainer.h"

namespace memtrain::bench {

struct LaneResult {
  bool feasible = true;
  std::string why;  // when infeasible: the trainer's reason
  runtime::TrainSummary summary;
  std::vector<runtime::StepRecord> records;
  int collect_steps = 0;

  // The records of the steps after the collection phase.
  std::span<const runtime::StepRecord> planned() const;
  // Mean wall time of the steps after the collection phase, s.
  double mean_step() const;
  // Over the steps after collection: the mean wall time of the schedules
  // that ran (failed attempts and the update left out), s; the largest
  // measured peak; the retries and the steps over budget.
  double mean_schedule() const;
  Bytes planned_peak() const;
  long planned_retries() const;
  long planned_violations() const;
  double max_peak_over_budget() const;
  double cache_hit_rate() const;
  // Over the steps after collection: the median of |simulated - measured| /
  // measured schedule time (the Simulator on the predicted chain).
  double median_schedule_time_error() const;
  // Over the steps after collection: their copies added up.
  CopyStats copies() const;
  // Over the steps after collection: the mean per step of one of the copies' byte counts.
  double mean_bytes(Bytes CopyStats::*field) const;
  // Over the steps after collection: the bytes copied one way over the
  // copies' own seconds that way, B/s; 0 when nothing moved.
  double copy_rate(bool to_host) const;
};

// One trainer with what it needs kept alive beside it.
struct Lane {
  std::unique_ptr<runtime::CpuDeviceMemory> memory;
  std::unique_ptr<runtime::BatchSource> source;
  std::unique_ptr<runtime::Trainer> trainer;
};

// Builds the lane of one planner; `options` already names the planner and budget.
using LaneFactory = std::function<Lane(const runtime::TrainerOptions& options)>;

// Lanes with fresh counted memory each, the batch source `source` makes for
// the options' seed, and a trainer of the model `model` builds.
LaneFactory lanes(std::function<std::unique_ptr<runtime::BatchSource>(std::uint64_t seed)> source,
                  runtime::Trainer::ModelFactory model);
// The default Transformer tagger on Brown, batch 32: what `memtrain train` runs.
LaneFactory tagger_lanes(std::shared_ptr<const data::TaggingDataset> data);
// The chain of `make`'s model at its largest input, every operator variant
// measured (planner joint's calibration, at 100%).
Chain measured_chain(const LaneFactory& make);

// Every planner at `budget` (e.g. "50%"), `steps` steps each in lockstep.
// A planner whose calibration fails (budget below its minimum) is reported
// infeasible with the trainer's reason. `kept`, when given, receives the
// feasible lanes, trained, for a caller that compares their models.
std::map<std::string, LaneResult> run_lockstep(const std::vector<std::string>& planners, const std::string& budget,
                                               int steps, const LaneFactory& make, const std::string& label,
                                               std::map<std::string, Lane>* kept = nullptr);

// The order contenders take their turns in `round`: as given in even
// rounds, reversed in odd ones (A B C, C B A, ...), so that over two
// rounds each stands as often early as late and drift weighs on all alike.
template <typename T>
std::vector<T> abba_order(std::vector<T> contenders, long round) {
  if (round % 2 != 0) std::reverse(contenders.begin(), contenders.end());
  return contenders;
}

double median(std::vector<double> values);  // 0 for none
std::string machine();                      // CPU model, cores, LibTorch version
std::string today();                        // YYYY-MM-DD, UTC
// A benchmark's main: runs `run` on the arguments; a UsageError exits 2 and
// any other error 1, each printed after the benchmark's name.
int bench_main(const char* name, int (*run)(const std::vector<std::string>&), int argc, char** argv);

// "30,50,70" -> {"30%", "50%", "70%"}: the --budgets flag.
std::vector<std::string> percent_budgets(const std::string& list);
// `v` with `digits` digits after the point, for report tables.
std::string fixed(double v, int digits);
// One line of a report's targets list: "- met: ..." or "- **not met**: ...".
void target_line(std::ostream& md, bool met, const std::string& what);
// Prints `report` and puts it between <!-- NAME:begin --> and <!-- NAME:end -->
// in `path` (appending it when absent), keeping the rest of the file.
void publish(const std::string& name, const std::string& report, const std::string& path);

}  // namespace memtrain::bench
