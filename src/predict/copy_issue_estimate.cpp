#include "predict/copy_issue_estimate.h"

#include <algorithm>

namespace memtrain::predict {

void CopyIssueEstimate::observe(const std::vector<Seconds>& issue_seconds) {
  if (issue_seconds.empty()) return;
  recent_.push_back(issue_seconds);
  if (static_cast<int>(recent_.size()) > kWindow) recent_.pop_front();
  std::vector<Seconds> all;
  for (const std::vector<Seconds>& step : recent_) all.insert(all.end(), step.begin(), step.end());
  std::sort(all.begin(), all.end());
  const size_t n = all.size();
  seconds_ = n % 2 == 1 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
}

}  // namespace memtrain::predict
