// A group of training jobs, each its own process, sharing one device budget
// through a POSIX shared-memory segment (/dev/shm/memtrain-jobs-<name>):
// - every allocation a member makes on the device is charged to one counter
//   of the group's live bytes, which never passes the budget (charge()
//   refuses instead);
// - before each step a member asks for a lease (acquire()), which the
//   group's policy sizes, and after it the lease shrinks to what stays
//   (settle());
// - a member that exits, or is killed, has its bytes reclaimed by whichever
//   process looks next (reap(): every waiting member, and the launcher).
// The segment's mutex is process-shared and robust: a member killed while
// holding it does not block the others.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/units.h"
#include "jobs/lease_policy.h"

namespace memtrain::jobs {

constexpr int kMaxJobs = 64;

struct GroupSettings {
  std::string name;  // 1..100 letters, digits, '-' or '_'
  Policy policy = Policy::Fcfs;
  std::string device = "cpu";  // members on another device are refused
  BudgetSpec budget;           // N%: of the sum of the starting jobs' unconstrained peaks at their largest inputs
  int expected_jobs = 1;       // jobs that start with the group; leases wait until all have calibrated
  // Jobs the device computes at full speed at once (lease_policy's decide);
  // 0: as many as there are jobs.
  double compute_slots = 0;
};

// UsageError naming `option` (a front end's name for the setting:
// "--device", "device") unless a group can be hosted on `device`: only the
// CPU, whose allocations memtrain counts. JobGroup::create checks it too.
void check_group_device(const std::string& device, const std::string& option);

// One member, as the launcher and the reports see it.
struct MemberState {
  enum Status { Joined, Finished, Gone } status = Joined;
  std::int32_t pid = 0;
  std::string label;
  Bytes live = 0, peak = 0, lease = 0, reference = 0, least_largest = 0;
  std::int64_t steps = 0;
  Seconds wait_seconds = 0;            // waiting for leases
  Seconds calibrate_wait_seconds = 0;  // waiting for the group to start
  Bytes reclaimed = 0;                 // bytes it still held when it was found gone
  std::int64_t replans = 0;            // times the tensile policy planned its allotment again (input drift)
  // How the arbiter granted its requests, by choice_name ("wait for whole":
  // requests that waited for their whole want first).
  std::map<std::string, std::int64_t> arbiter_choices;
  // Steps the other members took between this one's request for its first
  // lease and the grant; -1: not granted yet.
  std::int64_t others_steps_to_first_lease = -1;
};

struct GroupState {
  Bytes budget = -1;                 // -1: not resolved yet (N% waits for the starting jobs)
  Bytes live = 0;                    // all members' bytes now
  Bytes max_live = 0;                // the most they ever held at once, once the group started
  Bytes calibration_max_live = 0;    // the most while the starting jobs calibrated, unconstrained
  std::int64_t refusals = 0;         // charges refused by the group's budget
  std::string refused;               // why the group refused to start, or empty
  double compute_slots = 0;          // the device model the arbiter decides with (0: a slot per job)
  std::vector<MemberState> members;  // in joining order

  // The member with process id `pid`; null when none joined.
  const MemberState* member(std::int32_t pid) const {
    for (const MemberState& m : members) {
      if (m.pid == pid) return &m;
    }
    return nullptr;
  }
};

struct LeaseRequest {
  Bytes want = 0, least = 0;
  std::vector<BudgetPoint> curve;  // ascending, at most kCurvePoints; empty: {want}
};

// Asked about once a second while a member waits for the group's starting
// jobs to calibrate: how many have, of how many, and how long it has
// waited. Returning false, or throwing, stops the wait.
using StartWait = std::function<bool(int calibrated, int expected, Seconds waited)>;

class JobGroup {
 public:
  // The launcher's side: creates the group. UsageError when a live group of
  // that name exists.
  static std::unique_ptr<JobGroup> create(const GroupSettings& settings);
  // A member's side: joins the group, waiting up to `timeout` for it to
  // appear. UsageError when it does not, or when it runs on another device.
  static std::unique_ptr<JobGroup> join(const std::string& name, const std::string& device, const std::string& label,
                                        Seconds timeout);
  ~JobGroup();  // a member leaves (its bytes are given back); the creator removes the segment
  JobGroup(const JobGroup&) = delete;
  JobGroup& operator=(const JobGroup&) = delete;

  const std::string& name() const { return name_; }
  Policy policy() const;
  int member() const { return member_; }  // this member's place; -1 for the creator

  // Member: charges `bytes` to this member and the group; false (nothing
  // charged) when the group's live bytes would pass its budget. Lock-free.
  bool charge(Bytes bytes);
  void refund(Bytes bytes);
  Bytes budget() const;  // -1 until resolved

  // Member: one member calibrates at a time; the others wait their turn.
  void begin_calibration();
  // Member: publishes what calibration found, ends its turn, and waits until
  // every starting job has done so; returns the group's budget. Error (with
  // each job's least budget) when that budget cannot hold the jobs.
  // `tensors`: its largest tensors at its largest input whose swaps hide (the
  // tensile policy's view; the largest kTensorSizes are kept).
  Bytes calibrated(Bytes reference, Bytes least_largest, std::vector<Bytes> tensors = {},
                   const StartWait& waiting = {});
  // Member: blocks until the policy grants a lease; returns its bytes.
  // `waited` gets the time spent waiting. Error when the policy says no wait
  // will do.
  Bytes acquire(const LeaseRequest& request, Seconds* waited);
  // Member: the step is over; the lease shrinks to the bytes it keeps.
  void settle(bool step_taken);
  // Member: training is over; the next reap() does not count it as gone.
  void finish();

  // Anyone: finds members whose process has ended and reclaims their bytes.
  void reap();
  GroupState state() const;

 private:
  struct Segment;
  JobGroup() = default;
  void lock() const;
  void unlock() const;
  void reap_locked();
  void release_locked(int j);  // member j is gone: its bytes are free
  void resolve_locked();       // the budget and the feasibility check, once every starting job calibrated
  std::vector<JobView> views_locked() const;

  std::string name_, path_;
  Segment* segment_ = nullptr;
  bool creator_ = false;
  int member_ = -1;
};

}  // namespace memtrain::jobs
