// One line per step for people: on a terminal it redraws in place; in a log
// (not a terminal) it prints every tenth of the run and the last step. Steps
// count from the start of training, so a resumed run's first step may be
// far past 1: `total_steps` is the step the run ends at, not how many it has
// left.
#pragma once

#include <cstdint>
#include <cstdio>

#include "runtime/training/trainer.h"

namespace memtrain::cli {

class ProgressBar {
 public:
  ProgressBar(std::FILE* out, std::int64_t total_steps);
  void update(const runtime::StepRecord& r);
  void finish();

 private:
  std::FILE* out_;
  std::int64_t total_;
  bool terminal_;
  bool drawn_ = false;
};

}  // namespace memtrain::cli
