#include "jobs/core_shares.h"

#include <algorithm>

namespace memtrain::jobs {

namespace {

bool names_threads(const JobSpec& job) { return job.threads != 0; }

}  // namespace

std::vector<int> core_shares(const std::vector<JobSpec>& jobs, int cores) {
  std::vector<int> shares(jobs.size(), 0);
  int left = std::max(1, cores), sharing = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (names_threads(jobs[i])) {
      shares[i] = std::max(0, jobs[i].threads);
      left -= std::max(0, shares[i]);
    } else {
      ++sharing;
    }
  }
  if (sharing == 0) return shares;
  left = std::max(left, 0);
  const int each = left / sharing, spare = left % sharing;
  int k = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (names_threads(jobs[i])) continue;
    shares[i] = std::max(1, each + (k++ < spare ? 1 : 0));
  }
  return shares;
}

std::vector<int> share_cores(std::vector<JobSpec>& jobs, int cores) {
  const std::vector<int> shares = core_shares(jobs, cores);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!names_threads(jobs[i])) jobs[i].threads = shares[i];
  }
  return shares;
}

double compute_slots(const std::vector<int>& threads, int cores) {
  if (threads.empty()) return 1;
  long total = 0;
  for (int t : threads) total += std::max(1, t);
  const double n = static_cast<double>(threads.size());
  return std::clamp(static_cast<double>(cores) * n / static_cast<double>(total), 1.0, n);
}

}  // namespace memtrain::jobs
