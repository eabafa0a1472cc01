#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "data/coordinated_batches.h"
#include "support/packed_images.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

ShardBatchOptions batch_options() {
  ShardBatchOptions o;
  o.batch_size = 7;
  o.min_scale = 10;
  o.max_scale = 24;
  o.seed = 3;
  o.prep.threads = 1;
  return o;
}

std::string group(const std::string& what) { return "test-" + std::to_string(::getpid()) + "-" + what; }

// What a job alone gets: the reference every coordinated job must see.
std::vector<AugmentedBatch> alone(const ShardStorage& storage, std::int64_t count) {
  ShardImageBatcher b(storage, nullptr, batch_options());
  std::vector<AugmentedBatch> out;
  for (std::int64_t i = 0; i < count; ++i) out.push_back(b.next());
  return out;
}

void expect_same_batches(const std::vector<AugmentedBatch>& got, const std::vector<AugmentedBatch>& want,
                         const std::string& who) {
  ASSERT_EQ(got.size(), want.size()) << who;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].epoch, want[i].epoch) << who << " batch " << i;
    EXPECT_EQ(got[i].index, want[i].index) << who << " batch " << i;
    EXPECT_EQ(got[i].side, want[i].side) << who << " batch " << i;
    EXPECT_EQ(got[i].labels, want[i].labels) << who << " batch " << i;
    EXPECT_EQ(got[i].pixels, want[i].pixels) << who << " batch " << i;
  }
}

struct JobRun {
  std::vector<AugmentedBatch> batches;
  CoordinationCounters counters;
  std::string error;
};

// `jobs` jobs of one group in this process, each on its own thread, each taking `count` batches.
std::vector<JobRun> run_jobs(const ShardStorage& storage, const CoordinationOptions& c, int jobs, std::int64_t count) {
  std::vector<JobRun> runs(static_cast<size_t>(jobs));
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) {
    threads.emplace_back([&, j] {
      try {
        CoordinatedBatcher job(storage, nullptr, batch_options(), c);
        for (std::int64_t i = 0; i < count; ++i) runs[static_cast<size_t>(j)].batches.push_back(job.next());
        runs[static_cast<size_t>(j)].counters = job.counters();
      } catch (const std::exception& e) {
        runs[static_cast<size_t>(j)].error = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

TEST(CoordinatedBatcher, EveryJobTakesEveryBatchOnceInOrderAndEachIsPreparedOnce) {
  testing::TempDir dir;
  testing::pack_synthetic_images(45, 16 * 1024, dir.path());
  const ShardStorage storage(dir.path());
  const std::int64_t count = 2 * 7;  // two epochs of 7 batches (6 of 7 images, one of 3)
  CoordinationOptions c;
  c.name = group("three");
  c.jobs = 3;
  c.slots = 4;
  const std::vector<JobRun> runs = run_jobs(storage, c, 3, count);
  const std::vector<AugmentedBatch> want = alone(storage, count);
  std::int64_t prepared = 0;
  for (size_t j = 0; j < runs.size(); ++j) {
    ASSERT_EQ(runs[j].error, "");
    expect_same_batches(runs[j].batches, want, "job " + std::to_string(j));
    EXPECT_EQ(runs[j].counters.batches_taken, count);
    prepared += runs[j].counters.batches_prepared;
  }
  // Each batch once, plus at most the window's worth prepared ahead of the end.
  EXPECT_GE(prepared, count);
  EXPECT_LE(prepared, count + c.slots);
  EXPECT_NE(::access(("/dev/shm/memtrain-" + c.name).c_str(), F_OK), 0) << "the last job out removes the segment";
}

TEST(CoordinatedBatcher, AJobThatDiesDoesNotBlockTheOthersAndItsClaimIsPreparedAgain) {
  testing::TempDir dir;
  testing::pack_synthetic_images(45, 16 * 1024, dir.path());
  const ShardStorage storage(dir.path());
  const std::int64_t count = 2 * 7;
  CoordinationOptions c;
  c.name = group("dies");
  c.jobs = 3;
  c.slots = 3;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the job that dies: at its first claim, or else after taking 3 batches
    try {
      CoordinationOptions doomed = c;
      doomed.crash_after_claims = 0;
      CoordinatedBatcher job(storage, nullptr, batch_options(), doomed);
      for (int i = 0; i < 3; ++i) job.next();
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(0);  // without leaving the group: as if killed
  }
  const std::vector<JobRun> runs = run_jobs(storage, c, 2, count);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 4) << "the child joined the group";
  const std::vector<AugmentedBatch> want = alone(storage, count);
  std::int64_t reclaimed = 0;
  for (size_t j = 0; j < runs.size(); ++j) {
    ASSERT_EQ(runs[j].error, "");
    expect_same_batches(runs[j].batches, want, "live job " + std::to_string(j));
    reclaimed += runs[j].counters.reclaimed;
  }
  if (WEXITSTATUS(status) == 3) {
    EXPECT_GE(reclaimed, 1) << "the batch the dead job claimed was prepared again";
  }
}

TEST(CoordinatedBatcher, RefusesAMismatchedJobABadNameAndAGroupThatNeverFills) {
  testing::TempDir dir;
  testing::pack_synthetic_images(20, 16 * 1024, dir.path());
  const ShardStorage storage(dir.path());
  CoordinationOptions c;
  c.name = "bad name!";
  EXPECT_THROW(CoordinatedBatcher(storage, nullptr, batch_options(), c), UsageError);

  c.name = group("never");
  c.jobs = 2;
  c.join_timeout = 0.3;
  try {
    CoordinatedBatcher lonely(storage, nullptr, batch_options(), c);
    FAIL() << "a group of 2 started with 1";
  } catch (const UsageError&) {
    FAIL() << "not a usage error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 2 jobs joined"), std::string::npos) << e.what();
  }

  c.name = group("mismatch");
  c.join_timeout = 1;
  std::string refused;
  std::thread first([&] {
    try {
      CoordinatedBatcher job(storage, nullptr, batch_options(), c);
    } catch (const std::exception&) {
      // it times out once the second job is refused
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ShardBatchOptions other = batch_options();
  other.batch_size = 8;
  try {
    CoordinatedBatcher job(storage, nullptr, other, c);
  } catch (const UsageError& e) {
    refused = e.what();
  }
  first.join();
  EXPECT_NE(refused.find("this job's batch size 8 differs from the group's 7"), std::string::npos) << refused;
}

}  // namespace
}  // namespace memtrain::data
