// A device budget shared with other processes: this process joins a job
// group (jobs::JobGroup), every allocation its device pool makes from then
// on is charged to the group, and each step's budget is leased from it.
// The bytes the pool held when it joined (a model's weights made before)
// are charged to the group at once. Both front ends join through this: the
// CLI's `train --share NAME`, and Python's Module(share="NAME").
#pragma once

#include <memory>
#include <string>

#include "jobs/job_group.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/shared_account.h"
#include "runtime/step/step_lease.h"

namespace memtrain::runtime {

class SharedDevice : public SharedAccount, public StepLease {
 public:
  // Joins group `name` (waiting up to `timeout` for it) and charges the
  // device's pool to it from now on. UsageError for a device whose
  // allocations memtrain does not count (CUDA), a group that does not
  // appear, one on another device, or a pool shared already; Error when the
  // group's budget cannot hold what the pool holds already.
  SharedDevice(const std::string& name, DeviceMemory& memory, const std::string& label, Seconds timeout);
  ~SharedDevice() override;  // stops charging, then leaves the group
  SharedDevice(const SharedDevice&) = delete;
  SharedDevice& operator=(const SharedDevice&) = delete;

  void finish() { group_->finish(); }  // the run completed
  const std::string& group_name() const { return group_->name(); }
  jobs::Policy policy() const { return group_->policy(); }
  jobs::GroupState state() const { return group_->state(); }
  // UsageError unless `planner` may plan a job of this group (the tensile
  // policy plans its jobs with the tensile planner).
  void check_planner(const std::string& planner) const;
  // Asked while calibrated() waits for the group's starting jobs (a front
  // end says what it waits for, and may stop).
  void set_start_wait(jobs::StartWait waiting) { start_wait_ = std::move(waiting); }

  // SharedAccount
  bool charge(Bytes bytes) override { return group_->charge(bytes); }
  void refund(Bytes bytes) override { group_->refund(bytes); }
  std::string name() const override { return "job group " + group_->name(); }
  Bytes live() const override { return group_->state().live; }
  Bytes budget() const override { return group_->budget(); }

  // StepLease
  void begin_calibration() override { group_->begin_calibration(); }
  Bytes calibrated(Bytes reference, Bytes least_largest, const std::vector<Bytes>& swappable) override {
    return group_->calibrated(reference, least_largest, swappable, start_wait_);
  }
  Bytes acquire(const StepLeaseRequest& request, Seconds* waited) override;
  void settle(bool step_taken) override { group_->settle(step_taken); }

 private:
  std::unique_ptr<jobs::JobGroup> group_;
  MemoryPool* pool_;
  jobs::StartWait start_wait_;
};

}  // namespace memtrain::runtime
