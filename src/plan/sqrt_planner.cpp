#include "plan/sqrt_planner.h"

#include <cmath>

#include "plan/schedule_builders.h"

namespace memtrain::plan {

std::vector<int> SqrtPlanner::segment_starts(int stages) {
  const int segments = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(stages))));
  // Spread the remainder over the first segments so lengths differ by <= 1.
  std::vector<int> starts;
  int begin = 0;
  for (int k = 0; k < segments && begin < stages; ++k) {
    starts.push_back(begin);
    begin += stages / segments + (k < stages % segments ? 1 : 0);
  }
  return starts;
}

Plan SqrtPlanner::plan(const PlanRequest& request) {
  const int n = request.chain.size();
  return priced_plan(name(), request.chain, schedule_with_segments(n, segment_starts(n)), request.budget);
}

}  // namespace memtrain::plan
