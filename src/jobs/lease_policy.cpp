#include "jobs/lease_policy.h"

#include <algorithm>

#include "core/error.h"

namespace memtrain::jobs {

const char* const kPolicyNames = "static, proportional, fcfs or arbiter";

Policy parse_policy(const std::string& text) {
  if (text == "static") return Policy::Static;
  if (text == "proportional") return Policy::Proportional;
  if (text == "fcfs") return Policy::Fcfs;
  if (text == "arbiter") return Policy::Arbiter;
  throw UsageError("policy '" + text + "' is not known; expected " + kPolicyNames);
}

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::Static: return "static";
    case Policy::Proportional: return "proportional";
    case Policy::Fcfs: return "fcfs";
    case Policy::Arbiter: return "arbiter";
  }
  MEMTRAIN_ASSERT(false, "every policy has a name");
}

Bytes knee_of(const std::vector<BudgetPoint>& curve, double slack) {
  MEMTRAIN_ASSERT(!curve.empty(), "a request prices at least one budget");
  Seconds fastest = curve.back().seconds;
  for (const BudgetPoint& p : curve) fastest = std::min(fastest, p.seconds);
  for (const BudgetPoint& p : curve) {
    if (p.seconds <= fastest * (1 + slack)) return p.bytes;
  }
  return curve.back().bytes;
}

namespace {

// Bytes a job keeps from the others: its lease, or more if it is over it.
Bytes held(const JobView& j) { return j.present ? std::max(j.lease, j.live) : 0; }

Decision never(std::string why) { return {Decision::Never, 0, std::move(why)}; }

// An equal or proportional share: granted whole once the others leave room.
Decision fixed_share(Bytes share, const JobView& r, Bytes free_now) {
  if (share < r.least) {
    return never("its share " + format_bytes(share) + " is below the least " + format_bytes(r.least) +
                 " this input needs");
  }
  if (free_now < share) return {Decision::Wait, 0, ""};
  return {Decision::Grant, share, ""};
}

}  // namespace

Decision decide(Policy policy, const std::vector<JobView>& jobs, int requester, Bytes budget, int expected_jobs) {
  const JobView& r = jobs.at(static_cast<size_t>(requester));
  MEMTRAIN_ASSERT(r.present && r.waiting, "only an open request is decided");
  int present = 0;
  Bytes others_held = 0, others_resident = 0, references = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (!jobs[k].present) continue;
    ++present;
    references += jobs[k].reference;
    if (static_cast<int>(k) == requester) continue;
    others_held += held(jobs[k]);
    others_resident += jobs[k].resident;
  }
  const Bytes free_now = budget - others_held;
  // What the requester could get once every other job is between steps.
  const Bytes ever = budget - others_resident;
  if (ever < r.least) {
    return never("the least " + format_bytes(r.least) + " this input needs is more than the " + format_bytes(ever) +
                 " the other jobs leave of the budget " + format_bytes(budget));
  }
  switch (policy) {
    case Policy::Static: return fixed_share(budget / std::max(present, expected_jobs), r, free_now);
    case Policy::Proportional: {
      const double part = references > 0 ? static_cast<double>(r.reference) / static_cast<double>(references)
                                         : 1.0 / std::max(present, 1);
      return fixed_share(static_cast<Bytes>(part * static_cast<double>(budget)), r, free_now);
    }
    case Policy::Fcfs: {
      for (const JobView& k : jobs) {
        if (k.present && k.waiting && k.ticket < r.ticket) return {Decision::Wait, 0, ""};  // an older request
      }
      const Bytes whole = std::min(r.want, ever);
      if (free_now < whole) return {Decision::Wait, 0, ""};
      return {Decision::Grant, whole, ""};
    }
    case Policy::Arbiter: {
      // Older requests keep what they still lack of their least, so none starves.
      Bytes reserved = 0;
      for (const JobView& k : jobs) {
        if (k.present && k.waiting && k.ticket < r.ticket) reserved += std::max<Bytes>(0, k.least - held(k));
      }
      const Bytes room = free_now - reserved;
      if (room < r.least) return {Decision::Wait, 0, ""};
      // The knee when it fits: more buys little time and keeps others waiting.
      const Bytes knee = knee_of(r.curve, kArbiterSlack);
      if (room >= knee) return {Decision::Grant, std::max(knee, r.least), ""};
      // Otherwise the most the room holds, on the curve (plans repeat, the
      // plan cache hits), or the room itself.
      Bytes best = r.least;
      for (const BudgetPoint& p : r.curve) {
        if (p.bytes <= room) best = std::max(best, p.bytes);
      }
      return {Decision::Grant, best, ""};
    }
  }
  MEMTRAIN_ASSERT(false, "every policy decides");
}

}  // namespace memtrain::jobs
