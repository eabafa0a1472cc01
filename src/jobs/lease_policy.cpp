#include "jobs/lease_policy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace memtrain::jobs {

const char* const kPolicyNames = "static, proportional, fcfs, tensile or arbiter";

Policy parse_policy(const std::string& text) {
  if (text == "static") return Policy::Static;
  if (text == "proportional") return Policy::Proportional;
  if (text == "fcfs") return Policy::Fcfs;
  if (text == "arbiter") return Policy::Arbiter;
  if (text == "tensile") return Policy::Tensile;
  throw UsageError("policy '" + text + "' is not known; expected " + kPolicyNames);
}

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::Static: return "static";
    case Policy::Proportional: return "proportional";
    case Policy::Fcfs: return "fcfs";
    case Policy::Arbiter: return "arbiter";
    case Policy::Tensile: return "tensile";
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

// The need and least budget job `j`'s allotment is planned for.
Bytes planned_need(const JobView& j) { return j.planned > 0 ? j.planned : j.reference; }
Bytes planned_least(const JobView& j) { return j.planned > 0 ? j.planned_least : j.least_largest; }

}  // namespace

bool replan_tensile(JobView& j) {
  const Bytes need = planned_need(j);
  const bool drifted =
      need <= 0 || std::abs(static_cast<double>(j.want - need)) > kTensileDrift * static_cast<double>(need);
  if (!drifted || j.want <= 0) return false;
  j.planned = j.want;
  j.planned_least = j.least;
  return true;
}

std::vector<Bytes> tensile_allotments(const std::vector<JobView>& jobs, Bytes budget) {
  std::vector<Bytes> allot(jobs.size(), 0), least(jobs.size(), 0);
  Bytes excess = -budget;
  struct Tensor {
    Bytes bytes;
    size_t job;
  };
  std::vector<Tensor> tensors;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (!jobs[k].present) continue;
    const Bytes need = planned_need(jobs[k]);
    least[k] = planned_least(jobs[k]);
    allot[k] = std::max(need, least[k]);
    excess += allot[k];
    // Tensors known at the largest input; a smaller or larger need scales them.
    const double scale = jobs[k].reference > 0 && jobs[k].planned > 0
                             ? static_cast<double>(need) / static_cast<double>(jobs[k].reference)
                             : 1.0;
    for (Bytes t : jobs[k].tensors) tensors.push_back({static_cast<Bytes>(scale * static_cast<double>(t)), k});
  }
  if (excess <= 0) return allot;
  // Largest first; ties to the earlier job, so every member computes the same.
  std::stable_sort(tensors.begin(), tensors.end(), [](const Tensor& a, const Tensor& b) { return a.bytes > b.bytes; });
  for (const Tensor& t : tensors) {
    if (excess <= 0) break;
    const Bytes cut = std::min({t.bytes, excess, allot[t.job] - least[t.job]});
    if (cut <= 0) continue;
    allot[t.job] -= cut;
    excess -= cut;
  }
  if (excess <= 0) return allot;
  // Recomputation: the rest, in proportion to what each job can still give.
  Bytes room = 0;
  for (size_t k = 0; k < jobs.size(); ++k) room += jobs[k].present ? allot[k] - least[k] : 0;
  if (room <= 0) return allot;
  const double part = std::min(1.0, static_cast<double>(excess) / static_cast<double>(room));
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (!jobs[k].present) continue;
    const Bytes give = allot[k] - least[k];
    allot[k] -= static_cast<Bytes>(std::ceil(part * static_cast<double>(give)));
    allot[k] = std::max(allot[k], least[k]);
  }
  return allot;
}

namespace {

// Bytes a job keeps from the others: its lease, or more if it is over it.
Bytes held(const JobView& j) { return j.present ? std::max(j.lease, j.live) : 0; }

Decision never(std::string why) { return {Decision::Never, 0, std::move(why)}; }

// A job's share under static and proportional; the whole budget under the others.
Bytes share_of(Policy policy, const std::vector<JobView>& jobs, int j, Bytes budget, int expected_jobs) {
  int present = 0;
  Bytes references = 0;
  for (const JobView& k : jobs) {
    if (!k.present) continue;
    ++present;
    references += k.reference;
  }
  if (policy == Policy::Static) return budget / std::max(present, expected_jobs);
  if (policy != Policy::Proportional) return budget;
  const double part =
      references > 0 ? static_cast<double>(jobs.at(static_cast<size_t>(j)).reference) / static_cast<double>(references)
                     : 1.0 / std::max(present, 1);
  return static_cast<Bytes>(part * static_cast<double>(budget));
}

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

const char* choice_name(Decision::Choice choice) {
  switch (choice) {
    case Decision::Whole: return "whole";
    case Decision::WaitForWhole: return "wait for whole";
    case Decision::Knee: return "knee";
    case Decision::Fitting: return "fitting";
    case Decision::Other: break;
  }
  return "other";
}

Decision decide(Policy policy, const std::vector<JobView>& jobs, int requester, Bytes budget, int expected_jobs,
                double compute_slots) {
  const JobView& r = jobs.at(static_cast<size_t>(requester));
  MEMTRAIN_ASSERT(r.present && r.waiting, "only an open request is decided");
  Bytes others_held = 0, others_resident = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (!jobs[k].present || static_cast<int>(k) == requester) continue;
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
    case Policy::Static:
    case Policy::Proportional:
      return fixed_share(share_of(policy, jobs, requester, budget, expected_jobs), r, free_now);
    case Policy::Fcfs: {
      for (const JobView& k : jobs) {
        if (k.present && k.waiting && k.ticket < r.ticket) return {Decision::Wait, 0, ""};  // an older request
      }
      const Bytes whole = std::min(r.want, ever);
      if (free_now < whole) return {Decision::Wait, 0, ""};
      return {Decision::Grant, whole, ""};
    }
    case Policy::Tensile: {
      // TENSILE plans each job for an input (its largest, until the input
      // drifts and replan_tensile plans it for the new one): the lease is
      // the job's allotment, whatever this input needs (never less than its
      // least). Allotments follow the jobs present and their plans, so a
      // job joining, leaving or re-planning re-plans everyone's.
      const Bytes allot = tensile_allotments(jobs, budget).at(static_cast<size_t>(requester));
      const Bytes grant = std::max(r.least, std::min(allot, ever));
      if (free_now < grant) return {Decision::Wait, 0, ""};
      return {Decision::Grant, grant, ""};
    }
    case Policy::Arbiter: {
      int others_stepping = 0;
      for (size_t k = 0; k < jobs.size(); ++k) {
        others_stepping += static_cast<int>(k) != requester && jobs[k].present && jobs[k].stepping;
      }
      // Weighing waiting against recomputation on the device's compute
      // slots: while the other steps keep every slot busy, waiting costs the
      // group no device time and recomputation costs some, so the request
      // takes its whole want or waits for it (a running step ends and frees
      // memory). When its own step fills the last free slot, nothing is
      // gained by leaving memory to another job: whole want, if it fits.
      // Otherwise a slot would idle: the knee, or what fits now.
      const bool busy_without_it = compute_slots > 0 && others_stepping >= compute_slots;
      const bool fills_last_slot = compute_slots > 0 && others_stepping + 1 >= compute_slots;
      // Older requests keep what they still lack of their least (of their
      // whole want, when they wait for it), so none starves.
      Bytes reserved = 0;
      for (const JobView& k : jobs) {
        if (k.present && k.waiting && k.ticket < r.ticket) {
          reserved += std::max<Bytes>(0, (busy_without_it ? k.want : k.least) - held(k));
        }
      }
      const Bytes room = free_now - reserved;
      const Bytes whole = std::min(r.want, ever);
      if (fills_last_slot && room >= whole) return {Decision::Grant, whole, "", Decision::Whole};
      if (busy_without_it) return {Decision::Wait, 0, "", Decision::WaitForWhole};
      if (room < r.least) return {Decision::Wait, 0, ""};
      // The knee when it fits (more buys little time and keeps others waiting).
      const Bytes knee = knee_of(r.curve, kArbiterSlack);
      if (room >= knee) return {Decision::Grant, std::max(knee, r.least), "", Decision::Knee};
      // Otherwise the most the room holds, on the curve (plans repeat, the
      // plan cache hits), or the room itself.
      Bytes best = r.least;
      for (const BudgetPoint& p : r.curve) {
        if (p.bytes <= room) best = std::max(best, p.bytes);
      }
      return {Decision::Grant, best, "", Decision::Fitting};
    }
  }
  MEMTRAIN_ASSERT(false, "every policy decides");
}

Bytes most_ever_leased(Policy policy, const std::vector<JobView>& jobs, int j, Bytes budget, int expected_jobs) {
  Bytes others = 0;
  for (size_t k = 0; k < jobs.size(); ++k) others += jobs[k].present && static_cast<int>(k) != j ? jobs[k].resident : 0;
  return std::min(budget - others, share_of(policy, jobs, j, budget, expected_jobs));
}

std::string shortfall(Policy policy, const std::vector<JobView>& jobs, const std::vector<std::string>& labels,
                      Bytes budget, int expected_jobs) {
  std::string needs;
  bool short_of = false;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].present) continue;
    const Bytes room = most_ever_leased(policy, jobs, static_cast<int>(j), budget, expected_jobs);
    const bool short_here = jobs[j].least_largest > room;
    short_of = short_of || short_here;
    needs += std::string(needs.empty() ? "" : "; ") + labels.at(j) + " needs at least " +
             format_bytes(jobs[j].least_largest) + " and " + policy_name(policy) + " leaves it " +
             format_bytes(std::max<Bytes>(room, 0)) + (short_here ? " (short)" : "");
  }
  if (!short_of) return "";
  return "budget " + format_bytes(budget) + " (" + std::to_string(budget) +
         " bytes) is below what the jobs need at their largest inputs: " + needs;
}

double jain_index(const std::vector<double>& values) {
  double sum = 0, squares = 0;
  for (double x : values) {
    sum += x;
    squares += x * x;
  }
  return values.empty() ? 0 : sum * sum / (static_cast<double>(values.size()) * squares);
}

}  // namespace memtrain::jobs
