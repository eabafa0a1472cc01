// The model and dataset a command works on, from the flags `train`,
// `profile`, `advise` and `stalls` share: --model, --data, --data-dir, the
// model's size, the dataset's knobs and, for packed shards, the input
// pipeline's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cli/flags.h"
#include "data/fashion_mnist.h"
#include "data/tagging_dataset.h"
#include "runtime/builtin_models/model_registry.h"
#include "runtime/input/batch_source.h"
#include "runtime/input/shard_image_batches.h"
#include "runtime/training/trainer.h"

namespace memtrain::cli {

// Help lines for the flags below, for each command's help text.
extern const char* const kWorkloadHelp;
// The flags below that take no value, to add to each command's own switches.
std::set<std::string> with_workload_switches(std::set<std::string> switches);

struct WorkloadFlags {
  std::string model = "transformer";
  std::string data = "brown";  // brown, fashion-mnist or shards (then shards.dir is --data's directory)
  std::string data_dir;        // empty: where scripts/install-deps.sh puts it
  runtime::ModelSpec spec;
  std::int64_t vocab = 10000;   // Brown
  std::int64_t max_length = 0;  // Brown: longest sentence kept; 0 keeps all
  std::int64_t min_scale = 28;  // Fashion-MNIST
  std::int64_t max_scale = 112;
  runtime::ShardSourceOptions shards;  // --data DIR: packed image shards through the input pipeline
};

// Reads the flags; UsageError for a model and dataset that do not fit together.
WorkloadFlags read_workload_flags(Flags& flags);

class Workload {
 public:
  explicit Workload(const WorkloadFlags& flags);  // loads the dataset

  const WorkloadFlags& flags() const { return flags_; }
  std::unique_ptr<runtime::BatchSource> batches(std::int64_t batch, std::uint64_t seed) const;
  // Rank `rank` of `world`'s share of each global batch of world x `batch`:
  // image shards read only the rank's rows (through a cache partitioned
  // across the ranks with `partition`); other sources cut it from the
  // global batch (runtime::RankSliceBatches). The same rows either way.
  std::unique_ptr<runtime::BatchSource> rank_batches(
      std::int64_t batch, std::uint64_t seed, int rank, int world,
      const std::optional<runtime::ShardSourceOptions::Partition>& partition) const;
  runtime::Trainer::ModelFactory model_factory() const;

 private:
  WorkloadFlags flags_;
  runtime::DataShape shape_;
  std::shared_ptr<const data::TaggingDataset> tagging_;
  std::shared_ptr<const data::ImageDataset> images_;
};

}  // namespace memtrain::cli
