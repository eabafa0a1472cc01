// Prices several jobs sharing one device under a lease policy, without
// running them: each job's steps are planned by its own planner at the lease
// the policy (the same decide() the real group uses) grants, and priced by
// the Simulator; the jobs then share the device's memory (leases), its
// compute (time-sliced among the jobs computing at once, with a measured
// slowdown for those that run side by side) and its copy engines.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/chain.h"
#include "core/units.h"
#include "jobs/lease_policy.h"

namespace memtrain::group_sim {

struct SimJob {
  std::string label;
  Chain chain;  // calibrated at the job's largest input
  std::string planner = "mimose";
  std::int64_t steps = 1;
  // Each step's input as a fraction of the chain's, in (0, 1], cycled;
  // empty: every step the chain's. Activations and compute times scale with it.
  std::vector<double> sizes;
  Seconds start = 0;     // when the job joins the group
  Seconds overhead = 0;  // compute per step outside the schedule (data, planning, bookkeeping)
};

struct DeviceModel {
  // Jobs that compute at full speed at once: 1 time-slices a GPU among the
  // jobs computing; a CPU's cores for jobs of one compute thread each.
  double compute_slots = 1;
  // Each job computing beside k others runs (1 + contention * k) times
  // slower (memory bandwidth, caches), for k up to compute_slots - 1.
  double contention = 0;
  double copy_engines = 1;  // copies of this many jobs run at full speed at once
};

struct GroupSpec {
  std::vector<SimJob> jobs;
  DeviceModel device;
};

struct SimJobOutcome {
  std::string label;
  bool completed = false;
  std::string error;  // why it did not complete
  std::int64_t steps = 0;
  Seconds start = 0, end = 0;
  Seconds seconds = 0;        // end - start
  Seconds wait_seconds = 0;   // waiting for leases
  Seconds plain_seconds = 0;  // its steps' predicted time keeping everything, alone
  Bytes peak_bytes = 0;       // the most it held at once
  Bytes reference = 0, least_largest = 0;
  double msr = 0, eor = 0;
  std::int64_t tensile_replans = 0;  // times the tensile policy planned its allotment again (input drift)
  // How the arbiter granted its requests, by choice_name ("wait for whole":
  // requests that waited for their whole want before it was granted).
  std::map<std::string, std::int64_t> arbiter_choices;
};

struct GroupOutcome {
  Bytes budget = 0;
  jobs::Policy policy = jobs::Policy::Static;
  std::string refused;  // why the group could not start, or empty
  Seconds makespan = 0;
  std::int64_t violations = 0;  // steps whose peak passed their lease, plus 1 if the total passed the budget
  Bytes max_total_live = 0;
  double jain = 0;  // over the completed jobs' slowdowns (seconds / plain_seconds)
  std::vector<SimJobOutcome> jobs;
};

GroupOutcome simulate_group(const GroupSpec& spec, jobs::Policy policy, const BudgetSpec& budget);

// The chain at `fraction` of its input: activation bytes and compute times scaled.
Chain chain_at_fraction(const Chain& chain, double fraction);

// A jobs file (docs/jobs.md): {"device": {...}, "jobs": [{"chain": FILE, ...}]};
// chain paths are relative to the file. Error naming the field when bad.
GroupSpec read_group_file(const std::string& path);

}  // namespace memtrain::group_sim
