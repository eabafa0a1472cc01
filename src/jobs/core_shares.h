// The CPU cores a group's jobs share out. A job takes every core by
// default, so N jobs on C cores would run N*C compute threads and slow each
// other unpredictably; each job that names no thread count of its own gets
// its share of the cores its other jobs leave.
#pragma once

#include <vector>

#include "jobs/launcher.h"

namespace memtrain::jobs {

// The threads each job of `jobs` runs with on `cores` cores: its own when
// it names a count (JobSpec::threads != 0; 0 for a count its command will
// refuse), else an even share (at least 1) of the cores the others' own
// counts leave, spare cores going to the first jobs.
std::vector<int> core_shares(const std::vector<JobSpec>& jobs, int cores);

// Sets the threads of every job of `jobs` that names none to its share;
// returns every job's threads (core_shares).
std::vector<int> share_cores(std::vector<JobSpec>& jobs, int cores);

// How many of the jobs compute at full speed at once on `cores` cores, each
// with its `threads`: the cores over the mean threads, between 1 and the
// jobs (the device model the arbiter weighs waiting with).
double compute_slots(const std::vector<int>& threads, int cores);

}  // namespace memtrain::jobs
