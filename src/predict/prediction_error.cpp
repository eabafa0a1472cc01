#include "predict/prediction_error.h"

#include <algorithm>
#include <cmath>

namespace memtrain::predict {

void PredictionError::record(double predicted, double measured) {
  if (measured <= 0) return;
  errors_.push_back(std::fabs(predicted - measured) / measured);
}

double PredictionError::median() const {
  if (errors_.empty()) return 0;
  std::vector<double> e = errors_;
  const size_t mid = e.size() / 2;
  std::nth_element(e.begin(), e.begin() + mid, e.end());
  if (e.size() % 2) return e[mid];
  const double upper = e[mid];
  return (upper + *std::max_element(e.begin(), e.begin() + mid)) / 2;
}

double PredictionError::max() const { return errors_.empty() ? 0 : *std::max_element(errors_.begin(), errors_.end()); }

}  // namespace memtrain::predict
