// A group's jobs share the cores: jobs that name no --threads split what the
// others leave, so the group never runs more compute threads than cores
// (or than one per job, when there are more jobs than cores).
#include "jobs/core_shares.h"

#include <numeric>

#include <gtest/gtest.h>

namespace memtrain::jobs {
namespace {

JobSpec job(int threads) {
  JobSpec j;
  j.threads = threads;
  return j;
}

int total(const std::vector<int>& shares) { return std::accumulate(shares.begin(), shares.end(), 0); }

TEST(CoreShares, JobsWithoutThreadsSplitTheCores) {
  const std::vector<JobSpec> three(3, job(0));
  EXPECT_EQ(core_shares(three, 2), (std::vector<int>{1, 1, 1})) << "at least one thread a job";
  EXPECT_EQ(core_shares(three, 8), (std::vector<int>{3, 3, 2})) << "spare cores to the first jobs";
  for (int cores = 1; cores <= 64; ++cores)
    EXPECT_LE(total(core_shares(three, cores)), std::max(cores, 3)) << cores << " cores";
}

TEST(CoreShares, AJobsOwnThreadsAreKeptAndLeaveTheOthersTheRest) {
  const std::vector<JobSpec> jobs = {job(4), job(0), job(0)};
  EXPECT_EQ(core_shares(jobs, 8), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(core_shares(jobs, 4), (std::vector<int>{4, 1, 1}));
}

TEST(CoreShares, ShareCoresSetsThreadsOnlyWhereNoneIsGiven) {
  std::vector<JobSpec> jobs = {job(1), job(0), job(-1)};
  EXPECT_EQ(share_cores(jobs, 4), (std::vector<int>{1, 3, 0}));
  EXPECT_EQ(jobs[0].threads, 1);
  EXPECT_EQ(jobs[1].threads, 3);
  EXPECT_EQ(jobs[2].threads, -1) << "a count its command refuses stays, for the command to say why";
}

TEST(CoreShares, ComputeSlotsAreTheCoresOverTheMeanThreadsBetweenOneAndTheJobs) {
  EXPECT_DOUBLE_EQ(compute_slots({1, 1, 1}, 2), 2.0);     // three one-thread jobs on two cores
  EXPECT_DOUBLE_EQ(compute_slots({2, 2, 2}, 2), 1.0);     // every job every core: time-sliced
  EXPECT_DOUBLE_EQ(compute_slots({1, 1}, 16), 2.0);       // never more slots than jobs
  EXPECT_DOUBLE_EQ(compute_slots({4, 4, 4, 4}, 2), 1.0);  // never fewer than one
  EXPECT_DOUBLE_EQ(compute_slots({}, 8), 1.0);
}

}  // namespace
}  // namespace memtrain::jobs
