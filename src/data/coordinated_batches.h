// Coordinated preprocessing (CoorDL) for concurrent jobs on one machine that
// train on the same shards, e.g. a hyper-parameter search: each batch of an
// epoch is prepared once, by whichever job's prep thread claims it, into a
// slot of a POSIX shared-memory segment, and every job takes it from there
// exactly once, in order. A slot is freed when every live job has taken it.
//
// A job that dies does not block the others: each waiting job checks the
// group's pids, a dead job stops counting as a taker, and a batch a dead job
// was preparing is claimed again and prepared by a live one. Jobs wait for
// the whole group (`jobs`) to join before the first batch, so none can miss
// one; they must agree on the data (samples, batch, sides, seed, classes).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/units.h"
#include "data/shard_image_batcher.h"

namespace memtrain::data {

struct CoordinationOptions {
  std::string name;            // the group; the segment is /dev/shm/memtrain-<name>
  int jobs = 2;                // jobs in the group, 1..64
  int slots = 0;               // batches held at once; 0: jobs * prep threads + 2
  Seconds join_timeout = 120;  // waiting for the whole group
  // Fault injection for tests: the process exits (as if killed) from a prep
  // thread right after this many claims succeed; -1: never.
  int crash_after_claims = -1;
};

struct CoordinationCounters {
  std::int64_t batches_taken = 0;
  std::int64_t batches_prepared = 0;  // by this job, for the group
  std::int64_t reclaimed = 0;         // batches a dead job had claimed, prepared here
  std::int64_t skipped_corrupt = 0;   // samples left out of the batches taken
  Seconds prep_cpu_seconds = 0;       // CPU time this job's prep threads spent preparing
  Seconds wait_seconds = 0;           // next() waiting for a batch
};

class CoordinatedBatcher {
 public:
  // Joins (or creates) the group and waits for all of it; Error when it
  // does not fill within the timeout, UsageError when this job's data
  // options differ from the group's.
  CoordinatedBatcher(const ShardStorage& storage, SampleCache* cache, ShardBatchOptions options,
                     CoordinationOptions coordination);
  ~CoordinatedBatcher();  // leaves the group; the last job out removes the segment
  CoordinatedBatcher(const CoordinatedBatcher&) = delete;
  CoordinatedBatcher& operator=(const CoordinatedBatcher&) = delete;

  AugmentedBatch next();  // the group's next batch for this job; DataError from a failed preparation
  std::int64_t epoch() const { return epoch_; }
  std::int64_t batches_per_epoch() const;
  int job() const { return job_; }  // this job's place in the group
  CoordinationCounters counters() const;

 private:
  struct Segment;
  void check_options() const;
  // This job makes the group's segment: false when one exists already.
  bool create_segment(int slots, std::int64_t stride);
  // Maps the existing segment, `waited` seconds after this job began to
  // join; leaves segment_ null (to try again) where it went or is stale.
  void open_segment(Seconds waited);
  void join_group();  // takes this job's place, or refuses a mismatched job
  void wait_for_every_job(std::chrono::steady_clock::time_point start);
  void leave();  // marks this job gone; the last one out removes the segment
  void prep_loop();
  void prepare_into(int slot, std::int64_t sequence);
  void lock() const;
  void unlock() const;
  // Under the lock: marks jobs whose process is gone, frees slots every live job has taken.
  void reap() const;

  const ShardStorage& storage_;
  SampleCache* cache_;
  ShardBatchOptions options_;
  CoordinationOptions coordination_;
  std::string path_;
  Segment* segment_ = nullptr;
  std::size_t segment_bytes_ = 0;
  int job_ = -1;
  std::int64_t epoch_ = 0;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  mutable std::atomic<std::int64_t> prepared_{0}, reclaimed_{0}, prep_cpu_nanos_{0};
  CoordinationCounters counters_;
};

}  // namespace memtrain::data
