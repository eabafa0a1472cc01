// The model and dataset a command works on, from the flags `train`,
// `profile` and `advise` share: --model, --data, --data-dir, the model's
// size and the dataset's knobs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/flags.h"
#include "data/fashion_mnist.h"
#include "data/tagging_dataset.h"
#include "runtime/batch_source.h"
#include "runtime/models/model_registry.h"
#include "runtime/trainer.h"

namespace memtrain::cli {

// Help lines for the flags below, for each command's help text.
extern const char* const kWorkloadHelp;

struct WorkloadFlags {
  std::string model = "transformer";
  std::string data = "brown";
  std::string data_dir;            // empty: where scripts/install-deps.sh puts it
  runtime::ModelSpec spec;
  std::int64_t vocab = 10000;      // Brown
  std::int64_t max_length = 0;     // Brown: longest sentence kept; 0 keeps all
  std::int64_t min_scale = 28;     // Fashion-MNIST
  std::int64_t max_scale = 112;
};

// Reads the flags; UsageError for a model and dataset that do not fit together.
WorkloadFlags read_workload_flags(Flags& flags);

class Workload {
 public:
  explicit Workload(const WorkloadFlags& flags);  // loads the dataset

  const WorkloadFlags& flags() const { return flags_; }
  std::unique_ptr<runtime::BatchSource> batches(std::int64_t batch, std::uint64_t seed) const;
  runtime::Trainer::ModelFactory model_factory() const;

 private:
  WorkloadFlags flags_;
  runtime::DataShape shape_;
  std::shared_ptr<const data::TaggingDataset> tagging_;
  std::shared_ptr<const data::ImageDataset> images_;
};

}  // namespace memtrain::cli
