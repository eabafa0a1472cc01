#include "group_sim/group_simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "core/error.h"
#include "plan/frugal_schedule.h"
#include "plan/lease_curve.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "plan/tensile_planner.h"
#include "sim/simulator.h"

namespace memtrain::group_sim {

Chain chain_at_fraction(const Chain& chain, double fraction) {
  Chain c = chain;
  auto bytes = [&](Bytes b) { return static_cast<Bytes>(std::llround(static_cast<double>(b) * fraction)); };
  for (Stage& s : c.stages) {
    s.input_bytes = bytes(s.input_bytes);
    s.saved_bytes = bytes(s.saved_bytes);
    s.forward_temp_bytes = bytes(s.forward_temp_bytes);
    s.nograd_forward_temp_bytes = bytes(s.nograd_forward_temp_bytes);
    s.backward_temp_bytes = bytes(s.backward_temp_bytes);
    s.forward_time *= fraction;
    s.backward_time *= fraction;
    for (StageVariant& v : s.variants) {
      v.saved_bytes = bytes(v.saved_bytes);
      v.forward_temp_bytes = bytes(v.forward_temp_bytes);
      v.backward_temp_bytes = bytes(v.backward_temp_bytes);
      v.forward_time *= fraction;
      v.backward_time *= fraction;
    }
  }
  c.output_bytes = bytes(c.output_bytes);
  return c;
}

namespace {

constexpr double kDone = 1e-12;  // seconds of work left that count as none

// What a job asks before a step of one input size, as the trainer asks it.
struct Request {
  Chain chain;
  Schedule frugal;  // run when no plan fits the lease
  plan::LeaseCurve lease;
  Bytes plain_peak = 0;
  Seconds plain_time = 0;
};

struct Job {
  const SimJob* spec = nullptr;
  std::unique_ptr<plan::Planner> planner;
  std::map<double, Request> requests;    // by input fraction
  std::vector<Bytes> tensors;            // swappable at its largest input (the tensile policy's view)
  Bytes planned = 0, planned_least = 0;  // what the tensile policy planned its allotment for (0: largest input)
  bool waited_for_whole = false;         // the open request waited for its whole want (arbiter)
  bool joined = false, done = false;
  Bytes resident = 0, lease = 0, live = 0;
  std::int64_t ticket = -1;  // open request's arrival order; -1: none
  Seconds asked_at = 0;
  // The running step: compute and copy work left (run side by side), then
  // what neither shares (waits on dependencies).
  bool running = false;
  Seconds compute_left = 0, copy_left = 0, latency_left = 0;
  Bytes plain_peak_max = 0, step_peak_max = 0;
  Seconds planned_time = 0, plain_time = 0;
  SimJobOutcome out;

  double fraction() const {
    const std::vector<double>& s = spec->sizes;
    return s.empty() ? 1.0 : s[static_cast<size_t>(out.steps) % s.size()];
  }
};

const Request& request_of(Job& j, double fraction) {
  auto it = j.requests.find(fraction);
  if (it != j.requests.end()) return it->second;
  Request r;
  r.chain = chain_at_fraction(j.spec->chain, fraction);
  const int n = r.chain.size();
  const sim::SimResult plain = sim::simulate(r.chain, plan::schedule_keeping_everything(n));
  r.plain_peak = plain.peak_bytes;
  r.plain_time = plain.time;
  r.frugal =
      plan::most_frugal_schedule(*j.planner, r.chain, &j.spec->chain, plan::schedule_checkpointing_everything(n));
  r.lease = plan::lease_curve(*j.planner, r.chain, &j.spec->chain, r.frugal, jobs::kCurvePoints);
  return j.requests.emplace(fraction, std::move(r)).first->second;
}

// The group's run, step by step of simulated time: jobs join, ask for
// leases, are granted them in the order they asked, and run their steps
// side by side on the device's compute slots and copy engines.
class GroupRun {
 public:
  GroupRun(const GroupSpec& spec, jobs::Policy policy, const BudgetSpec& budget_spec);
  GroupOutcome run();

 private:
  // How fast the running steps' compute and copies go, each a fraction of one alone.
  struct Rates {
    double compute = 0, copy = 0;
  };
  // The jobs as the policy sees them; `starting`: before any step, those that start with the group.
  std::vector<jobs::JobView> views(bool starting = false) const;
  void ask(Job& j);
  Bytes total_live() const;
  void join_arrivals();
  // Grants, oldest request first, until none changes.
  void grant_leases();
  bool grant_one_pass();
  void start_step(Job& j, Bytes lease);
  Rates rates() const;
  // Time to the next event (a job joins, a step's part ends); infinite when none will come.
  Seconds next_event(const Rates& r) const;
  void advance(Seconds dt, const Rates& r);
  void abandon_waiting();
  GroupOutcome outcome();

  const GroupSpec& spec_;
  jobs::Policy policy_;
  std::vector<Job> jobs_;
  GroupOutcome g_;
  int expected_ = 0;  // jobs that start with the group
  Seconds now_ = 0;
  std::int64_t tickets_ = 0;
};

GroupRun::GroupRun(const GroupSpec& spec, jobs::Policy policy, const BudgetSpec& budget_spec)
    : spec_(spec), policy_(policy), jobs_(spec.jobs.size()) {
  if (spec.jobs.empty()) throw UsageError("job group: it has no jobs");
  if (!(spec.device.compute_slots >= 1) || !(spec.device.copy_engines >= 1) || !(spec.device.contention >= 0)) {
    throw UsageError(
        "job group: device compute_slots and copy_engines must be at least 1 and contention at "
        "least 0");
  }
  g_.policy = policy;
  Bytes references = 0;
  for (size_t k = 0; k < jobs_.size(); ++k) {
    Job& j = jobs_[k];
    j.spec = &spec.jobs[k];
    const std::string planner = policy == jobs::Policy::Tensile ? "tensile" : j.spec->planner;
    j.planner = plan::make_planner(planner);
    const Chain& largest = j.spec->chain;
    j.resident = largest.persistent_bytes();
    j.out.label = j.spec->label;
    j.out.reference = plan::keep_everything_peak(largest);
    j.out.least_largest = request_of(j, 1.0).lease.least;
    j.tensors = plan::swappable_tensor_bytes(largest);
    references += j.out.reference;
  }
  g_.budget = budget_spec.resolve(references);
  expected_ =
      static_cast<int>(std::count_if(spec.jobs.begin(), spec.jobs.end(), [](const SimJob& s) { return s.start <= 0; }));
}

std::vector<jobs::JobView> GroupRun::views(bool starting) const {
  std::vector<jobs::JobView> v(jobs_.size());
  for (size_t k = 0; k < jobs_.size(); ++k) {
    const Job& j = jobs_[k];
    jobs::JobView& x = v[k];
    x.present = starting ? j.spec->start <= 0 : j.joined && !j.done;
    x.live = j.live;
    x.lease = j.lease;
    x.resident = j.resident;
    x.reference = j.out.reference;
    x.least_largest = j.out.least_largest;
    x.tensors = j.tensors;
    x.planned = j.planned;
    x.planned_least = j.planned_least;
    x.stepping = j.running;
    x.waiting = j.ticket >= 0;
    x.ticket = j.ticket;
    if (x.waiting) {
      const plan::LeaseCurve& r = j.requests.at(j.fraction()).lease;
      x.want = r.want;
      x.least = r.least;
      for (const auto& [bytes, seconds] : r.curve) x.curve.push_back({bytes, seconds});
    }
  }
  return v;
}

void GroupRun::ask(Job& j) {
  request_of(j, j.fraction());
  j.ticket = tickets_++;
  j.asked_at = now_;
  if (policy_ == jobs::Policy::Tensile) {
    jobs::JobView mine = views().at(static_cast<size_t>(&j - jobs_.data()));
    if (jobs::replan_tensile(mine)) {
      j.planned = mine.planned;
      j.planned_least = mine.planned_least;
      ++j.out.tensile_replans;
    }
  }
}

Bytes GroupRun::total_live() const {
  Bytes t = 0;
  for (const Job& j : jobs_) t += j.joined && !j.done ? j.live : 0;
  return t;
}

void GroupRun::join_arrivals() {
  for (Job& j : jobs_) {
    if (j.joined || j.spec->start > now_ + kDone) continue;
    j.joined = true;
    j.out.start = now_;
    j.lease = j.live = j.resident;
    if (j.spec->steps > 0) {
      ask(j);
    } else {
      j.done = j.out.completed = true;
      j.out.end = now_;
    }
  }
}

void GroupRun::grant_leases() {
  while (grant_one_pass()) {
  }
}

bool GroupRun::grant_one_pass() {
  std::vector<size_t> order;
  for (size_t k = 0; k < jobs_.size(); ++k) {
    if (jobs_[k].joined && !jobs_[k].done && jobs_[k].ticket >= 0) order.push_back(k);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return jobs_[a].ticket < jobs_[b].ticket; });
  bool granted = false;
  for (size_t k : order) {
    Job& j = jobs_[k];
    const jobs::Decision d =
        jobs::decide(policy_, views(), static_cast<int>(k), g_.budget, expected_, spec_.device.compute_slots);
    if (d.choice == jobs::Decision::WaitForWhole) j.waited_for_whole = true;
    if (d.kind == jobs::Decision::Never) {
      j.done = true;
      j.out.error = d.why;
      j.out.end = now_;
      j.ticket = -1;
      j.live = j.lease = 0;
      return true;  // the others' views changed: decide again from the oldest
    }
    if (d.kind == jobs::Decision::Wait) continue;
    if (d.choice != jobs::Decision::Other) {
      // Each granted request once: how it was granted, and whether it waited for its whole want first.
      ++j.out.arbiter_choices[jobs::choice_name(d.choice)];
      if (j.waited_for_whole) ++j.out.arbiter_choices[jobs::choice_name(jobs::Decision::WaitForWhole)];
    }
    j.waited_for_whole = false;
    start_step(j, d.bytes);
    granted = true;
  }
  return granted;
}

void GroupRun::start_step(Job& j, Bytes lease) {
  const Request& r = j.requests.at(j.fraction());
  const Plan p = j.planner->plan({r.chain, lease, &j.spec->chain});
  const sim::SimResult priced = sim::simulate(r.chain, p.feasible ? p.schedule : r.frugal);
  j.out.wait_seconds += now_ - j.asked_at;
  j.ticket = -1;
  j.lease = lease;
  j.live = priced.peak_bytes;
  if (priced.peak_bytes > lease) ++g_.violations;
  const Seconds stall = priced.copies.stall_seconds();
  j.compute_left = std::max<Seconds>(0, priced.time - stall) + j.spec->overhead;
  j.copy_left = priced.copies.seconds();
  j.latency_left = std::max<Seconds>(0, priced.time - std::max(priced.time - stall, j.copy_left));
  j.running = true;
  j.planned_time += priced.time;
  j.plain_time += r.plain_time;
  j.step_peak_max = std::max(j.step_peak_max, priced.peak_bytes);
  j.plain_peak_max = std::max(j.plain_peak_max, r.plain_peak);
  j.out.plain_seconds += r.plain_time + j.spec->overhead;
  j.out.peak_bytes = std::max(j.out.peak_bytes, priced.peak_bytes);
}

GroupRun::Rates GroupRun::rates() const {
  int computing = 0, copying = 0;
  for (const Job& j : jobs_) {
    if (!j.running) continue;
    computing += j.compute_left > kDone;
    copying += j.copy_left > kDone;
  }
  const DeviceModel& d = spec_.device;
  const double side_by_side = std::min<double>(computing, d.compute_slots);
  Rates r;
  r.compute = computing == 0
                  ? 0
                  : std::min(1.0, d.compute_slots / computing) / (1 + d.contention * std::max(0.0, side_by_side - 1));
  r.copy = copying == 0 ? 0 : std::min(1.0, d.copy_engines / copying);
  return r;
}

Seconds GroupRun::next_event(const Rates& r) const {
  Seconds dt = std::numeric_limits<Seconds>::infinity();
  for (const Job& j : jobs_) {
    if (!j.joined && !j.done) dt = std::min(dt, j.spec->start - now_);
    if (!j.running) continue;
    if (j.compute_left > kDone) dt = std::min(dt, j.compute_left / r.compute);
    if (j.copy_left > kDone) dt = std::min(dt, j.copy_left / r.copy);
    if (j.compute_left <= kDone && j.copy_left <= kDone) dt = std::min(dt, j.latency_left);
  }
  return dt;
}

void GroupRun::advance(Seconds dt, const Rates& r) {
  now_ += dt;
  for (Job& j : jobs_) {
    if (!j.running) continue;
    if (j.compute_left > kDone || j.copy_left > kDone) {
      j.compute_left = std::max<Seconds>(0, j.compute_left - dt * r.compute);
      j.copy_left = std::max<Seconds>(0, j.copy_left - dt * r.copy);
    } else {
      j.latency_left = std::max<Seconds>(0, j.latency_left - dt);
    }
    if (j.compute_left > kDone || j.copy_left > kDone || j.latency_left > kDone) continue;
    j.running = false;
    ++j.out.steps;
    j.lease = j.live = j.resident;
    if (j.out.steps == j.spec->steps) {
      j.done = j.out.completed = true;
      j.out.end = now_;
    } else {
      ask(j);
    }
  }
}

void GroupRun::abandon_waiting() {
  // Nothing runs and nothing will join: any request left waits forever.
  for (Job& j : jobs_) {
    if (!j.joined || j.done) continue;
    j.done = true;
    j.out.error = "waited for a lease that no other job's step would free";
    j.out.end = now_;
  }
}

GroupOutcome GroupRun::outcome() {
  std::vector<double> slowdowns;
  for (Job& j : jobs_) {
    j.out.seconds = j.out.end - j.out.start;
    g_.makespan = std::max(g_.makespan, j.out.end);
    if (j.plain_peak_max > 0) j.out.msr = 1 - static_cast<double>(j.step_peak_max) / j.plain_peak_max;
    if (j.plain_time > 0) j.out.eor = j.planned_time / j.plain_time - 1;
    if (j.out.completed && j.out.plain_seconds > 0) slowdowns.push_back(j.out.seconds / j.out.plain_seconds);
    g_.jobs.push_back(j.out);
  }
  g_.jain = jobs::jain_index(slowdowns);
  if (g_.max_total_live > g_.budget) ++g_.violations;
  return g_;
}

GroupOutcome GroupRun::run() {
  // The group is refused, as the real one is, when a starting job's least
  // at its largest input cannot fit what the policy could ever lease it; a
  // job joining later that cannot is refused its first lease.
  std::vector<std::string> labels;
  for (size_t k = 0; k < jobs_.size(); ++k)
    labels.push_back("job " + std::to_string(k + 1) + " (" + jobs_[k].spec->label + ")");
  g_.refused = jobs::shortfall(policy_, views(true), labels, g_.budget, expected_);
  if (!g_.refused.empty()) {
    for (Job& j : jobs_) g_.jobs.push_back(j.out);
    return g_;
  }
  while (true) {
    join_arrivals();
    grant_leases();
    g_.max_total_live = std::max(g_.max_total_live, total_live());
    const Rates r = rates();
    const Seconds dt = next_event(r);
    if (!std::isfinite(dt)) {
      abandon_waiting();
      break;
    }
    advance(std::max<Seconds>(dt, 0), r);
    if (std::all_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.done; })) break;
  }
  return outcome();
}

}  // namespace

GroupOutcome simulate_group(const GroupSpec& spec, jobs::Policy policy, const BudgetSpec& budget_spec) {
  return GroupRun(spec, policy, budget_spec).run();
}

}  // namespace memtrain::group_sim
