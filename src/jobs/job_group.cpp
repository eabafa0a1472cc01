// The segment is created whole by the launcher (or a test) before any member
// joins, so joining needs no creation race: a member waits for the magic
// number, written last.
#include "jobs/job_group.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "core/error.h"
#include "core/process_shared.h"
#include "core/seconds_since.h"

namespace memtrain::jobs {

namespace {

constexpr std::uint64_t kGroupMagic = 0x6d656d6a6f627331ull;  // "memjobs1"
enum SlotStatus : std::int32_t { kFree = 0, kJoined = 1, kFinished = 2, kGone = 3 };
constexpr Seconds kPoll = 0.002;  // between looks at the group while waiting

using Clock = std::chrono::steady_clock;

void pause_briefly() { std::this_thread::sleep_for(std::chrono::duration<double>(kPoll)); }

template <typename T>
void raise_to(std::atomic<T>& most, T value) {
  T seen = most.load();
  while (value > seen && !most.compare_exchange_weak(seen, value)) {
  }
}

void copy_text(char* to, size_t size, const std::string& from) {
  const size_t n = std::min(size - 1, from.size());
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

void check_name(const std::string& name) {
  if (name.empty() || name.size() > 100 || !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    throw UsageError("job group '" + name + "' is not a group name; expected 1..100 letters, digits, '-' or '_'");
  }
}

}  // namespace

struct JobGroup::Segment {
  struct Slot {
    std::int32_t pid, status;
    char label[96];
    std::atomic<Bytes> live, peak;
    Bytes lease, resident, reference, least_largest, reclaimed;
    std::int32_t calibrated, waiting;
    std::int64_t ticket, steps;
    Bytes want, least;
    std::int32_t curve_points, in_step;  // in_step: holds a lease not yet settled
    Bytes curve_bytes[kCurvePoints];
    double curve_seconds[kCurvePoints];
    double wait_seconds, calibrate_wait_seconds;
    std::int64_t others_steps_at_request, others_steps_to_first_lease;
    std::int32_t tensor_count, pad;
    Bytes tensors[kTensorSizes];
    Bytes planned, planned_least;  // what the tensile policy planned its allotment for (0: the largest input)
    std::int64_t replans;          // times it did so
    std::int64_t choices[5];       // the arbiter's grants by Decision::Choice (WaitForWhole: requests that waited)
  };

  std::atomic<std::uint64_t> magic;
  pthread_mutex_t mutex;
  std::int32_t policy, expected, joined, calibrating;
  std::int32_t budget_is_percent, resolved;
  std::int32_t creator_pid, pad;
  double compute_slots;
  double percent;
  Bytes given_bytes;  // a budget in bytes, resolved as it is
  // -1 until resolved: the starting jobs calibrate one at a time before any
  // of them trains, measuring unconstrained (calibration_max_live).
  std::atomic<Bytes> budget;
  std::atomic<Bytes> live, max_live, calibration_max_live;
  std::atomic<std::int64_t> refusals;
  std::int64_t next_ticket;
  char device[64];
  char refused[4096];
  Slot slot[kMaxJobs];

  std::int64_t steps_except(int j) const {
    std::int64_t n = 0;
    for (int k = 0; k < joined; ++k) n += k == j ? 0 : slot[k].steps;
    return n;
  }
};

void check_group_device(const std::string& device, const std::string& option) {
  if (device != "cpu") {
    throw UsageError(option + " '" + device +
                     "' is not supported for sharing yet; jobs share a budget on the counted CPU device; expected "
                     "'cpu'");
  }
}

std::unique_ptr<JobGroup> JobGroup::create(const GroupSettings& settings) {
  check_name(settings.name);
  check_group_device(settings.device, "device");
  if (settings.expected_jobs < 0 || settings.expected_jobs > kMaxJobs) {
    throw UsageError("jobs in the group " + std::to_string(settings.expected_jobs) + " is out of range; expected 0.." +
                     std::to_string(kMaxJobs));
  }
  std::unique_ptr<JobGroup> g(new JobGroup);
  g->name_ = settings.name;
  g->path_ = "/memtrain-jobs-" + settings.name;
  for (int attempt = 0;; ++attempt) {
    const int fd = ::shm_open(g->path_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      if (::ftruncate(fd, sizeof(Segment)) != 0) {
        ::close(fd);
        ::shm_unlink(g->path_.c_str());
        throw Error("job group " + settings.name + ": cannot size shared memory: " + std::strerror(errno));
      }
      void* p = ::mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ::close(fd);
      if (p == MAP_FAILED) throw Error("job group " + settings.name + ": cannot map shared memory");
      g->segment_ = static_cast<Segment*>(p);  // zero-filled by ftruncate
      break;
    }
    if (errno != EEXIST || attempt > 0)
      throw Error("job group " + settings.name + ": shm_open failed: " + std::strerror(errno));
    // A segment of that name: refused while any of its members or its
    // creator lives, removed when it is a leftover.
    std::unique_ptr<JobGroup> old;
    try {
      old = join(settings.name, "", "", 0.5);
    } catch (const Error&) {
    }
    if (old) {
      bool running = !process_gone(old->segment_->creator_pid);
      for (int j = 0; j < old->segment_->joined; ++j) {
        if (old->segment_->slot[j].status == kJoined && !process_gone(old->segment_->slot[j].pid)) running = true;
      }
      if (running) throw UsageError("job group " + settings.name + " already runs; choose another name");
    }
    ::shm_unlink(g->path_.c_str());
  }
  Segment* s = g->segment_;
  init_process_shared_mutex(&s->mutex);
  s->policy = static_cast<std::int32_t>(settings.policy);
  s->expected = settings.expected_jobs;
  s->compute_slots = settings.compute_slots;
  s->calibrating = -1;
  s->budget_is_percent = settings.budget.is_percent;
  s->percent = settings.budget.percent;
  s->given_bytes = settings.budget.is_percent ? -1 : settings.budget.bytes;
  s->budget.store(-1);
  copy_text(s->device, sizeof(s->device), settings.device);
  s->creator_pid = static_cast<std::int32_t>(::getpid());
  if (s->expected == 0 && !s->budget_is_percent) g->resolve_locked();  // no starting job to wait for
  s->magic.store(kGroupMagic, std::memory_order_release);
  g->creator_ = true;
  return g;
}

std::unique_ptr<JobGroup> JobGroup::join(const std::string& name, const std::string& device, const std::string& label,
                                         Seconds timeout) {
  check_name(name);
  std::unique_ptr<JobGroup> g(new JobGroup);
  g->name_ = name;
  g->path_ = "/memtrain-jobs-" + name;
  const Clock::time_point start = Clock::now();
  while (true) {
    const int fd = ::shm_open(g->path_.c_str(), O_RDWR, 0600);
    if (fd >= 0) {
      struct stat st {};
      ::fstat(fd, &st);
      if (st.st_size >= static_cast<off_t>(sizeof(Segment))) {
        void* p = ::mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        if (p == MAP_FAILED) throw Error("job group " + name + ": cannot map shared memory");
        auto* s = static_cast<Segment*>(p);
        if (s->magic.load(std::memory_order_acquire) == kGroupMagic) {
          g->segment_ = s;
          break;
        }
        ::munmap(p, sizeof(Segment));
      } else {
        ::close(fd);
      }
    }
    if (seconds_since(start) > timeout) {
      throw UsageError("job group " + name + " does not exist (none appeared within " + format_number("%.1f", timeout) +
                       " s)");
    }
    pause_briefly();
  }
  Segment* s = g->segment_;
  if (label.empty() && device.empty()) return g;  // create() looking at a leftover: not a member
  g->lock();
  const std::int32_t creator = s->creator_pid;
  if (process_gone(creator)) {
    g->unlock();
    throw UsageError("job group " + name + ": its launcher (pid " + std::to_string(creator) + ") has exited");
  }
  if (device != s->device) {
    const std::string theirs = s->device;
    g->unlock();
    throw UsageError("job group " + name + " shares a budget on device " + theirs + "; this job runs on " + device +
                     ": jobs of a group must be on one device");
  }
  if (s->refused[0]) {
    const std::string why = s->refused;
    g->unlock();
    throw Error("job group " + name + " refused to start: " + why);
  }
  if (s->joined >= kMaxJobs) {
    g->unlock();
    throw UsageError("job group " + name + " is full (" + std::to_string(kMaxJobs) + " jobs)");
  }
  const int j = s->joined++;
  Segment::Slot& me = s->slot[j];
  me.pid = static_cast<std::int32_t>(::getpid());
  me.status = kJoined;
  copy_text(me.label, sizeof(me.label), label);
  me.others_steps_to_first_lease = -1;
  g->member_ = j;
  g->unlock();
  return g;
}

JobGroup::~JobGroup() {
  if (!segment_) return;
  if (member_ >= 0) {
    try {
      lock();
      // Left without finish(): its training ended early (an error).
      if (segment_->slot[member_].status == kJoined) release_locked(member_);
      unlock();
    } catch (const Error&) {
    }
  }
  ::munmap(segment_, sizeof(Segment));
  if (creator_) ::shm_unlink(path_.c_str());
}

Policy JobGroup::policy() const { return static_cast<Policy>(segment_->policy); }

void JobGroup::lock() const { lock_process_shared_mutex(&segment_->mutex, "job group " + name_); }

void JobGroup::unlock() const { pthread_mutex_unlock(&segment_->mutex); }

bool JobGroup::charge(Bytes bytes) {
  Segment* s = segment_;
  Segment::Slot& me = s->slot[member_];
  if (me.status != kJoined) return true;  // finished: its frees at exit are its own
  const Bytes now = s->live.fetch_add(bytes) + bytes;
  const Bytes budget = s->budget.load();
  if (budget >= 0 && now > budget) {
    s->live.fetch_sub(bytes);
    s->refusals.fetch_add(1);
    return false;
  }
  raise_to(budget >= 0 ? s->max_live : s->calibration_max_live, now);
  raise_to(me.peak, me.live.fetch_add(bytes) + bytes);
  return true;
}

void JobGroup::refund(Bytes bytes) {
  Segment::Slot& me = segment_->slot[member_];
  if (me.status != kJoined) return;
  me.live.fetch_sub(bytes);
  segment_->live.fetch_sub(bytes);
}

Bytes JobGroup::budget() const { return segment_->budget.load(); }

void JobGroup::reap_locked() {
  Segment* s = segment_;
  for (int j = 0; j < s->joined; ++j) {
    Segment::Slot& m = s->slot[j];
    // Its process cannot charge or refund any more: what it held is free.
    if (m.status == kJoined && process_gone(m.pid)) release_locked(j);
  }
}

void JobGroup::release_locked(int j) {
  Segment* s = segment_;
  Segment::Slot& m = s->slot[j];
  m.reclaimed = m.live.load();
  s->live.fetch_sub(m.live.exchange(0));
  m.lease = 0;
  m.waiting = 0;
  m.in_step = 0;
  m.status = kGone;
  if (s->calibrating == j) s->calibrating = -1;
}

void JobGroup::reap() {
  lock();
  reap_locked();
  unlock();
}

void JobGroup::begin_calibration() {
  const Clock::time_point start = Clock::now();
  Segment* s = segment_;
  while (true) {
    lock();
    reap_locked();
    if (s->calibrating < 0 || s->calibrating == member_) {
      s->calibrating = member_;
      break;
    }
    unlock();
    pause_briefly();
  }
  // A job joining a running group measures once the others are between
  // steps; they take no new lease until it is done (acquire waits), so its
  // measurements have the budget less their resident bytes to themselves.
  while (s->resolved) {
    bool others_in_step = false;
    for (int j = 0; j < s->joined; ++j) {
      others_in_step = others_in_step || (j != member_ && s->slot[j].status == kJoined && s->slot[j].in_step);
    }
    if (!others_in_step) break;
    unlock();
    pause_briefly();
    lock();
    reap_locked();
  }
  s->slot[member_].calibrate_wait_seconds += seconds_since(start);
  unlock();
}

void JobGroup::resolve_locked() {
  Segment* s = segment_;
  if (s->resolved) return;
  int settled = 0;  // starting jobs that calibrated, or are gone
  for (int j = 0; j < s->joined; ++j) {
    if (s->slot[j].calibrated || s->slot[j].status != kJoined) ++settled;
  }
  if (settled < s->expected) return;
  Bytes budget = s->given_bytes;
  if (s->budget_is_percent) {
    Bytes references = 0;
    for (int j = 0; j < s->joined; ++j) {
      if (s->slot[j].status == kJoined) references += s->slot[j].reference;
    }
    budget = BudgetSpec{true, s->percent, 0}.resolve(references);  // N% resolved as every budget is
  }
  // Every job must fit at its largest input beside the others' resident bytes.
  std::vector<std::string> labels;
  for (int j = 0; j < s->joined; ++j) labels.push_back(s->slot[j].label);
  const std::string shortfall_text =
      shortfall(static_cast<Policy>(s->policy), views_locked(), labels, budget, s->expected);
  if (!shortfall_text.empty()) copy_text(s->refused, sizeof(s->refused), shortfall_text);
  s->budget.store(budget);
  s->resolved = 1;
}

Bytes JobGroup::calibrated(Bytes reference, Bytes least_largest, std::vector<Bytes> tensors, const StartWait& waiting) {
  Segment* s = segment_;
  const Clock::time_point start = Clock::now();
  lock();
  Segment::Slot& me = s->slot[member_];
  me.reference = reference;
  me.least_largest = least_largest;
  std::sort(tensors.begin(), tensors.end(), std::greater<Bytes>());
  me.tensor_count = static_cast<std::int32_t>(std::min<size_t>(tensors.size(), kTensorSizes));
  std::copy_n(tensors.begin(), me.tensor_count, me.tensors);
  me.resident = me.live.load();
  me.lease = me.resident;
  me.calibrated = 1;
  if (s->calibrating == member_) s->calibrating = -1;
  const bool late = s->resolved != 0;  // joined a running group
  resolve_locked();
  unlock();
  Clock::time_point asked = start;
  while (true) {
    lock();
    reap_locked();
    resolve_locked();
    if (s->refused[0]) {
      const std::string why = s->refused;
      unlock();
      throw Error("job group " + name_ + ": " + why);
    }
    if (s->resolved) {
      const Bytes budget = s->budget.load();
      const Bytes room = most_ever_leased(static_cast<Policy>(s->policy), views_locked(), member_, budget, s->expected);
      me.calibrate_wait_seconds += seconds_since(start);
      unlock();
      if (late && least_largest > room) {
        throw Error("job group " + name_ + ": this job needs at least " + format_bytes(least_largest) +
                    " at its largest input, and the budget " + format_bytes(budget) + " leaves it " +
                    format_bytes(room) + " beside the other jobs");
      }
      return budget;
    }
    int settled = 0;  // as resolve_locked() counts them
    for (int j = 0; j < s->joined; ++j) settled += s->slot[j].calibrated || s->slot[j].status != kJoined;
    const int expected = s->expected;
    unlock();
    if (waiting && seconds_since(asked) >= 1) {
      asked = Clock::now();
      if (!waiting(settled, expected, seconds_since(start))) {
        throw Error("job group " + name_ + ": stopped waiting for its starting jobs after " +
                    format_number("%.0f", seconds_since(start)) + " s (" + std::to_string(settled) + " of " +
                    std::to_string(expected) + " have calibrated)");
      }
    }
    pause_briefly();
  }
}

std::vector<JobView> JobGroup::views_locked() const {
  const Segment* s = segment_;
  std::vector<JobView> views(static_cast<size_t>(s->joined));
  for (int j = 0; j < s->joined; ++j) {
    const Segment::Slot& m = s->slot[j];
    JobView& v = views[static_cast<size_t>(j)];
    v.present = m.status == kJoined;
    v.live = m.live.load();
    v.lease = m.lease;
    v.resident = m.calibrated ? m.resident : 0;
    v.reference = m.reference;
    v.least_largest = m.least_largest;
    v.tensors.assign(m.tensors, m.tensors + m.tensor_count);
    v.planned = m.planned;
    v.planned_least = m.planned_least;
    v.stepping = m.in_step != 0;
    v.waiting = m.waiting != 0;
    v.ticket = m.ticket;
    v.want = m.want;
    v.least = m.least;
    for (int p = 0; p < m.curve_points; ++p) v.curve.push_back({m.curve_bytes[p], m.curve_seconds[p]});
  }
  return views;
}

Bytes JobGroup::acquire(const LeaseRequest& request, Seconds* waited) {
  MEMTRAIN_ASSERT(request.least <= request.want && request.curve.size() <= static_cast<size_t>(kCurvePoints),
                  "a lease request asks for least <= want, on a short curve");
  Segment* s = segment_;
  Segment::Slot& me = s->slot[member_];
  const Clock::time_point start = Clock::now();
  lock();
  me.want = request.want;
  me.least = request.least;
  const std::vector<BudgetPoint> curve =
      request.curve.empty() ? std::vector<BudgetPoint>{{request.want, 0}} : request.curve;
  me.curve_points = static_cast<std::int32_t>(curve.size());
  for (size_t p = 0; p < curve.size(); ++p) {
    me.curve_bytes[p] = curve[p].bytes;
    me.curve_seconds[p] = curve[p].seconds;
  }
  if (static_cast<Policy>(s->policy) == Policy::Tensile) {
    JobView mine = views_locked().at(static_cast<size_t>(member_));
    if (replan_tensile(mine)) {
      me.planned = mine.planned;
      me.planned_least = mine.planned_least;
      ++me.replans;
    }
  }
  me.ticket = s->next_ticket++;
  me.waiting = 1;
  me.others_steps_at_request = s->steps_except(member_);
  unlock();
  bool waited_for_whole = false;
  while (true) {
    lock();
    reap_locked();
    const bool joiner_measures = s->calibrating >= 0 && s->calibrating != member_;
    const Decision d = joiner_measures ? Decision{Decision::Wait, 0, ""}
                                       : decide(static_cast<Policy>(s->policy), views_locked(), member_,
                                                s->budget.load(), std::max(s->expected, 0), s->compute_slots);
    if (d.kind == Decision::Wait) {
      waited_for_whole = waited_for_whole || d.choice == Decision::WaitForWhole;
      unlock();
      pause_briefly();
      continue;
    }
    if (d.kind == Decision::Grant && d.choice != Decision::Other) {
      ++me.choices[d.choice];
      if (waited_for_whole) ++me.choices[Decision::WaitForWhole];
    }
    me.waiting = 0;
    const Seconds w = seconds_since(start);
    me.wait_seconds += w;
    if (waited) *waited = w;
    if (d.kind == Decision::Never) {
      unlock();
      throw Error("job group " + name_ + ": policy " + policy_name(static_cast<Policy>(s->policy)) +
                  " cannot lease this step what it needs: " + d.why);
    }
    me.lease = d.bytes;
    me.in_step = 1;
    if (me.others_steps_to_first_lease < 0)
      me.others_steps_to_first_lease = s->steps_except(member_) - me.others_steps_at_request;
    unlock();
    return d.bytes;
  }
}

void JobGroup::settle(bool step_taken) {
  lock();
  Segment::Slot& me = segment_->slot[member_];
  me.resident = me.live.load();
  me.lease = me.resident;
  me.in_step = 0;
  if (step_taken) ++me.steps;
  unlock();
}

void JobGroup::finish() {
  lock();
  Segment::Slot& me = segment_->slot[member_];
  if (me.status == kJoined) {
    segment_->live.fetch_sub(me.live.exchange(0));
    me.lease = 0;
    me.status = kFinished;
  }
  unlock();
}

GroupState JobGroup::state() const {
  const Segment* s = segment_;
  GroupState g;
  lock();
  g.budget = s->budget.load();
  g.live = s->live.load();
  g.max_live = s->max_live.load();
  g.calibration_max_live = s->calibration_max_live.load();
  g.refusals = s->refusals.load();
  g.refused = s->refused;
  g.compute_slots = s->compute_slots;
  for (int j = 0; j < s->joined; ++j) {
    const Segment::Slot& m = s->slot[j];
    MemberState ms;
    ms.status = m.status == kFinished ? MemberState::Finished
                : m.status == kGone   ? MemberState::Gone
                                      : MemberState::Joined;
    ms.pid = m.pid;
    ms.label = m.label;
    ms.live = m.live.load();
    ms.peak = m.peak.load();
    ms.lease = m.lease;
    ms.reference = m.reference;
    ms.least_largest = m.least_largest;
    ms.steps = m.steps;
    ms.wait_seconds = m.wait_seconds;
    ms.calibrate_wait_seconds = m.calibrate_wait_seconds;
    ms.reclaimed = m.reclaimed;
    ms.replans = m.replans;
    for (int c = Decision::Whole; c <= Decision::Fitting; ++c) {
      if (m.choices[c] > 0) ms.arbiter_choices[choice_name(static_cast<Decision::Choice>(c))] = m.choices[c];
    }
    ms.others_steps_to_first_lease = m.others_steps_to_first_lease;
    g.members.push_back(ms);
  }
  unlock();
  return g;
}

}  // namespace memtrain::jobs
