// Relative error of predicted against measured values (peak bytes, schedule
// seconds), step by step.
#pragma once

#include <vector>

#include "core/units.h"

namespace memtrain::predict {

class PredictionError {
 public:
  // |predicted - measured| / measured; ignored when measured <= 0.
  void record(double predicted, double measured);
  double median() const;  // 0 when nothing is recorded
  double max() const;
  std::size_t count() const { return errors_.size(); }
  double last() const { return errors_.empty() ? 0 : errors_.back(); }

 private:
  std::vector<double> errors_;
};

}  // namespace memtrain::predict
