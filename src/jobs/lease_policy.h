// How a device budget shared by several jobs is leased to them, step by
// step. Before each step a job asks for a lease: `want` (its predicted peak
// for this step's input under its fastest plan), `least` (the least budget
// its planner can work with for that input) and the predicted step time at
// a few budgets between the two. A policy grants it some bytes, tells it to
// wait, or says it can never be granted enough. Whatever it grants, the
// leases and the memory the other jobs hold never add up to more than the
// budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"

namespace memtrain::jobs {

enum class Policy {
  Static,        // an equal split of the budget
  Proportional,  // split in proportion to each job's unconstrained peak at its largest input
  Fcfs,          // requests in arrival order, each granted its whole want; wait when short
  Arbiter,       // per-step leases sized where they buy time; older requests first
  Tensile,       // TENSILE: fixed allotments, the global peak lowered by swapping the jobs' largest tensors
};

Policy parse_policy(const std::string& text);  // UsageError names the valid ones
const char* policy_name(Policy policy);
extern const char* const kPolicyNames;  // "static, proportional, fcfs, tensile or arbiter"

constexpr int kCurvePoints = 6;   // budgets a request prices its step at
constexpr int kTensorSizes = 16;  // a job's largest swappable tensors, as the tensile policy sees them

// A step's predicted time under a budget.
struct BudgetPoint {
  Bytes bytes = 0;
  Seconds seconds = 0;
};

// What a policy sees of one job of the group.
struct JobView {
  bool present = false;     // joined, and neither finished nor gone
  Bytes live = 0;           // bytes it holds now
  Bytes lease = 0;          // bytes leased to it now (its step's budget; its resident bytes between steps)
  Bytes resident = 0;       // bytes it keeps between steps (weights, optimizer state)
  Bytes reference = 0;      // unconstrained peak at its largest input
  Bytes least_largest = 0;  // the least budget its planner needs at its largest input
  // Its largest tensors at its largest input whose swaps hide, descending
  // (at most kTensorSizes): what the tensile policy takes its memory from.
  std::vector<Bytes> tensors;
  // The need (peak) and least budget its tensile allotment is planned for;
  // 0: its largest input's (reference, least_largest).
  Bytes planned = 0, planned_least = 0;
  bool stepping = false;    // it holds a lease and is running its step
  bool waiting = false;     // it has a request open
  std::int64_t ticket = 0;  // arrival order of that request
  Bytes want = 0, least = 0;
  std::vector<BudgetPoint> curve;  // ascending bytes; the last point is `want`
};

struct Decision {
  enum Kind { Grant, Wait, Never } kind = Wait;
  Bytes bytes = 0;  // Grant: the step's budget, at least `least`
  std::string why;  // Never: why no wait will help
  // The arbiter's reason, for its report.
  enum Choice { Other, Whole, WaitForWhole, Knee, Fitting } choice = Other;
};

// The arbiter's choices, named for reports: "whole", "wait for whole", ...
const char* choice_name(Decision::Choice choice);

// The decision on `requester`'s open request. `expected_jobs`: the jobs the
// group was started with (static and proportional split among at least these).
// `compute_slots`: jobs the device computes at full speed at once (1: a GPU
// time-sliced among them; a CPU's cores over each job's threads); 0: as many
// as there are jobs. The arbiter weighs waiting against recomputation with
// it: while the other jobs' steps keep every slot busy, a request waits for
// its whole want (waiting costs the group no device time; recomputing adds
// some); when a slot would idle, it takes the knee of its curve, or the most
// that fits now.
Decision decide(Policy policy, const std::vector<JobView>& jobs, int requester, Bytes budget, int expected_jobs,
                double compute_slots = 0);

// The most job `j` can ever be leased: the budget less what the other
// present jobs keep between steps, and under static and proportional no more
// than its share.
Bytes most_ever_leased(Policy policy, const std::vector<JobView>& jobs, int j, Bytes budget, int expected_jobs);

// Why `budget` cannot hold the present jobs at their largest inputs (a job's
// least_largest above what the policy could ever lease it), naming each job
// by `labels`; empty when it can.
std::string shortfall(Policy policy, const std::vector<JobView>& jobs, const std::vector<std::string>& labels,
                      Bytes budget, int expected_jobs);

// Jain's fairness index of `values` (each > 0): 1 when all are equal, 1/n
// when one has everything.
double jain_index(const std::vector<double>& values);

// TENSILE's allotments: each present job's scheduled peak for the input it
// is planned for (its largest, until it re-plans), the jobs' peaks taken to
// add up (their global peak). When they pass the budget, swaps lower them:
// the largest tensor of any job first (a re-planned job's tensors scaled
// with its need), a job never below its least budget; what swaps cannot
// cover is recomputed, taken from the jobs in proportion to what each can
// still give. 0 for absent jobs.
std::vector<Bytes> tensile_allotments(const std::vector<JobView>& jobs, Bytes budget);

// TENSILE re-plans a job whose input drifts: when the need of the step it
// asks for (`want`) is more than this far from the need its allotment was
// planned for, the allotment is planned again for this step's need.
constexpr double kTensileDrift = 0.30;
// Called as job `j` opens a request: re-plans its allotment for the
// request (planned = want, planned_least = least) when its need drifted by
// more than kTensileDrift; returns whether it did.
bool replan_tensile(JobView& j);

// The arbiter's choice on a curve: the fewest bytes whose predicted time is
// within `slack` of the fastest.
Bytes knee_of(const std::vector<BudgetPoint>& curve, double slack);
constexpr double kArbiterSlack = 0.05;

}  // namespace memtrain::jobs
