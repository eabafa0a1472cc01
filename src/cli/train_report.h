// The JSON a training run writes with --json (format in docs/usage.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "jobs/launcher.h"

#include "runtime/training/trainer.h"

namespace memtrain::cli {

struct RunInfo {
  std::string model;
  std::string data;
  std::string device;
  std::uint64_t seed = 0;
  nlohmann::json input_pipeline;  // counters of packed-shard input; null for in-memory datasets
  int cpu_threads = 0;            // LibTorch's intra-op threads
  std::string blas_library;       // what LibTorch computes with (cli::blas_name)
  int rank = 0, world = 1;        // data parallelism: this rank of how many
  bool deterministic_reduce = false;
  bool shard_optimizer = false;
};

// A digest of every parameter's bytes (FNV-1a, 64 bits, in hex): two runs
// whose parameters are bit for bit equal have the same.
std::string parameter_digest(runtime::StagedModel& model);

nlohmann::json train_report(const runtime::Trainer& trainer, const RunInfo& info);
// What a job of a group needs from the report train_report wrote at `path`
// (memtrain jobs reads its jobs' reports with it); none when there is none,
// or it is not such a report.
std::optional<jobs::JobRunReport> read_job_run_report(const std::string& path);

}  // namespace memtrain::cli
