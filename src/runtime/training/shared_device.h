// `memtrain train --share NAME`: the run's device budget is a job group's
// (jobs::JobGroup). Every allocation on the device is charged to the group,
// and each step's budget is leased from it.
#pragma once

#include <memory>
#include <string>

#include "jobs/job_group.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/shared_account.h"
#include "runtime/training/step_lease.h"

namespace memtrain::cli {

class SharedDevice : public runtime::SharedAccount, public runtime::StepLease {
 public:
  // Joins group `name` (waiting up to `timeout` for it) and charges the
  // device's pool to it from now on. UsageError for a device whose
  // allocations memtrain does not count (CUDA), or a group on another device.
  SharedDevice(const std::string& name, runtime::DeviceMemory& memory, const std::string& device,
               const std::string& label, Seconds timeout);
  ~SharedDevice() override;  // stops charging, then leaves the group

  void finish() { group_->finish(); }  // the run completed

  // SharedAccount
  bool charge(Bytes bytes) override { return group_->charge(bytes); }
  void refund(Bytes bytes) override { group_->refund(bytes); }
  std::string name() const override { return "job group " + group_->name(); }
  Bytes live() const override { return group_->state().live; }
  Bytes budget() const override { return group_->budget(); }

  // StepLease
  void begin_calibration() override { group_->begin_calibration(); }
  Bytes calibrated(Bytes reference, Bytes least_largest, const std::vector<Bytes>& swappable) override {
    return group_->calibrated(reference, least_largest, swappable);
  }
  jobs::Policy policy() const { return group_->policy(); }
  Bytes acquire(const runtime::StepLeaseRequest& request, Seconds* waited) override;
  void settle(bool step_taken) override { group_->settle(step_taken); }

 private:
  std::unique_ptr<jobs::JobGroup> group_;
  runtime::MemoryPool* pool_;
};

}  // namespace memtrain::cli
