#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "core/error.h"
#include "jobs/job_group.h"

namespace memtrain::jobs {
namespace {

std::string group_name(const std::string& what) { return "test-" + std::to_string(::getpid()) + "-" + what; }

GroupSettings settings(const std::string& what, BudgetSpec budget, Policy policy, int expected) {
  GroupSettings s;
  s.name = group_name(what);
  s.policy = policy;
  s.device = "cpu";
  s.budget = budget;
  s.expected_jobs = expected;
  return s;
}

BudgetSpec bytes(Bytes b) {
  BudgetSpec s;
  s.bytes = b;
  return s;
}

template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

void wait_until(const std::function<bool()>& done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << what;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Both starting members calibrate (each waits for the other) with the same figures.
void calibrate_both(JobGroup& a, JobGroup& b, Bytes reference, Bytes least) {
  std::thread tb([&] { b.calibrated(reference, least); });
  a.calibrated(reference, least);
  tb.join();
}

TEST(JobGroup, JoiningNamesWhatIsWrong) {
  EXPECT_NE(error_of<UsageError>([] { JobGroup::join(group_name("none"), "cpu", "a", 0.05); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>([] { JobGroup::join("bad name!", "cpu", "a", 0.05); }).find("not a group name"),
            std::string::npos);
  const auto group = JobGroup::create(settings("device", bytes(1000), Policy::Fcfs, 1));
  EXPECT_NE(error_of<UsageError>([] { JobGroup::join(group_name("device"), "cuda:0", "a", 1); }).find("one device"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>([] {
              JobGroup::create(settings("device", bytes(1000), Policy::Fcfs, 1));
            }).find("already runs"),
            std::string::npos);
}

TEST(JobGroup, OnlyTheCountedCpuDeviceHostsAGroup) {
  GroupSettings on_cuda = settings("on-cuda", bytes(1000), Policy::Fcfs, 1);
  on_cuda.device = "cuda:0";
  const std::string refused = error_of<UsageError>([&] { JobGroup::create(on_cuda); });
  EXPECT_NE(refused.find("device 'cuda:0' is not supported for sharing yet"), std::string::npos) << refused;
  EXPECT_NE(refused.find("expected 'cpu'"), std::string::npos) << refused;
  EXPECT_EQ(error_of<UsageError>([] { check_group_device("cuda", "--device"); }).rfind("--device 'cuda'", 0), 0u);
  EXPECT_NO_THROW(check_group_device("cpu", "--device"));
  // Refused before anything was made: the name is free.
  on_cuda.device = "cpu";
  EXPECT_NO_THROW(JobGroup::create(on_cuda));
}

TEST(JobGroup, MembersInSeveralProcessesNeverChargePastTheBudget) {
  constexpr Bytes kBudget = 1 << 20;
  const auto group = JobGroup::create(settings("charges", bytes(kBudget), Policy::Fcfs, 0));
  const std::string name = group_name("charges");  // before fork: the name holds the parent's pid
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int status = 0;
      try {
        auto me = JobGroup::join(name, "cpu", "child " + std::to_string(c), 5);
        std::mt19937 rng(static_cast<unsigned>(c));
        std::vector<Bytes> held;
        for (int i = 0; i < 20000; ++i) {
          // Up to 16 x 128 KiB each: one child alone can ask for more than the budget.
          if (held.size() < 16 && rng() % 2) {
            const Bytes b = 1024 + static_cast<Bytes>(rng() % (128 * 1024));
            if (me->charge(b)) held.push_back(b);
          } else if (!held.empty()) {
            me->refund(held.back());
            held.pop_back();
          }
        }
        for (Bytes b : held) me->refund(b);
        me->finish();
      } catch (...) {
        status = 3;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const GroupState s = group->state();
  EXPECT_LE(s.max_live, kBudget);
  EXPECT_GT(s.max_live, kBudget / 2);
  EXPECT_GT(s.refusals, 0);
  EXPECT_EQ(s.live, 0);
  ASSERT_EQ(s.members.size(), 3u);
  for (const MemberState& m : s.members) EXPECT_EQ(m.status, MemberState::Finished);
}

// A member killed with SIGKILL, holding memory, and not yet collected by its
// parent (a zombie): the next look at the group frees what it held.
TEST(JobGroup, AKilledMembersBytesAreReclaimed) {
  const auto group = JobGroup::create(settings("killed", bytes(1 << 20), Policy::Fcfs, 0));
  const std::string name = group_name("killed");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto me = JobGroup::join(name, "cpu", "victim", 5);
    me->charge(300000);
    const char c = 'x';
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(group->state().live, 300000);
  ::kill(pid, SIGKILL);
  wait_until(
      [&] {
        group->reap();
        return group->state().live == 0;
      },
      "the killed member's bytes are reclaimed");
  const GroupState s = group->state();
  ASSERT_EQ(s.members.size(), 1u);
  EXPECT_EQ(s.members[0].status, MemberState::Gone);
  EXPECT_EQ(s.members[0].reclaimed, 300000);
  ::waitpid(pid, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(JobGroup, APercentBudgetWaitsForEveryStartingJobAndCalibrationTakesTurns) {
  BudgetSpec half;
  half.is_percent = true;
  half.percent = 50;
  const auto group = JobGroup::create(settings("percent", half, Policy::Fcfs, 2));
  auto a = JobGroup::join(group_name("percent"), "cpu", "a", 1);
  auto b = JobGroup::join(group_name("percent"), "cpu", "b", 1);
  a->begin_calibration();
  std::atomic<bool> b_turn{false};
  Bytes b_budget = 0;
  std::thread tb([&] {
    b->begin_calibration();
    b_turn = true;
    b_budget = b->calibrated(3000, 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(b_turn.load()) << "b calibrates while a does";
  EXPECT_EQ(group->state().budget, -1);
  const Bytes a_budget = a->calibrated(1000, 100);  // returns once b is done too
  tb.join();
  EXPECT_TRUE(b_turn.load());
  EXPECT_EQ(a_budget, 2000);  // 50% of 1000 + 3000
  EXPECT_EQ(b_budget, 2000);
}

TEST(JobGroup, ABudgetTooSmallForTheJobsNamesEachJobAndItsLeast) {
  const auto group = JobGroup::create(settings("small", bytes(1000), Policy::Fcfs, 2));
  auto a = JobGroup::join(group_name("small"), "cpu", "job 1 (tagger)", 1);
  auto b = JobGroup::join(group_name("small"), "cpu", "job 2 (resnet)", 1);
  ASSERT_TRUE(a->charge(300));
  ASSERT_TRUE(b->charge(300));
  std::string b_error;
  std::thread tb([&] { b_error = error_of<Error>([&] { b->calibrated(5000, 800); }); });
  const std::string a_error = error_of<Error>([&] { a->calibrated(5000, 600); });
  tb.join();
  for (const std::string& e : {a_error, b_error}) {
    EXPECT_NE(e.find("below what the jobs need"), std::string::npos) << e;
    EXPECT_NE(e.find("job 1 (tagger) needs at least 600 B"), std::string::npos) << e;
    EXPECT_NE(e.find("job 2 (resnet) needs at least 800 B and fcfs leaves it 700 B (short)"), std::string::npos) << e;
  }
  EXPECT_NE(group->state().refused.find("resnet"), std::string::npos);
}

TEST(JobGroup, ALeaseWaitsUntilAnotherJobsStepEnds) {
  const auto group = JobGroup::create(settings("lease", bytes(1000), Policy::Fcfs, 2));
  auto a = JobGroup::join(group_name("lease"), "cpu", "a", 1);
  auto b = JobGroup::join(group_name("lease"), "cpu", "b", 1);
  ASSERT_TRUE(a->charge(100));
  ASSERT_TRUE(b->charge(100));
  calibrate_both(*a, *b, 500, 300);

  LeaseRequest r;
  r.least = 300;
  r.want = 600;
  EXPECT_EQ(a->acquire(r, nullptr), 600);
  ASSERT_TRUE(a->charge(500));  // a's step runs
  std::atomic<Bytes> b_lease{0};
  std::thread tb([&] { b_lease = b->acquire(r, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(b_lease.load(), 0) << "granted while a's step holds 600 of 1000";
  a->refund(500);
  a->settle(true);
  tb.join();
  EXPECT_EQ(b_lease.load(), 600);
  const GroupState s = group->state();
  EXPECT_EQ(s.members[1].others_steps_to_first_lease, 1);
  EXPECT_GT(s.members[1].wait_seconds, 0.04);
  // Leases steer the jobs; the budget is the hard limit at every charge.
  EXPECT_FALSE(b->charge(801)) << "a's 100 and b's 100 leave 800 of 1000";
  EXPECT_TRUE(b->charge(800));
  EXPECT_EQ(group->state().max_live, 1000);
}

// A job joining a running group measures alone: once the others' steps are
// over, and before any of them takes another lease.
TEST(JobGroup, ALateJobCalibratesBetweenTheOthersSteps) {
  const auto group = JobGroup::create(settings("late", bytes(1000), Policy::Fcfs, 1));
  auto a = JobGroup::join(group_name("late"), "cpu", "a", 1);
  a->calibrated(500, 300);
  LeaseRequest r;
  r.least = 300;
  r.want = 400;
  EXPECT_EQ(a->acquire(r, nullptr), 400);  // a's step runs
  auto late = JobGroup::join(group_name("late"), "cpu", "late", 1);
  std::atomic<bool> measuring{false}, measured{false};
  std::thread t([&] {
    late->begin_calibration();
    measuring = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    measured = true;
    late->calibrated(500, 300);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(measuring.load()) << "calibrates while a's step runs";
  a->settle(true);
  wait_until([&] { return measuring.load(); }, "the late job calibrates once a's step is over");
  EXPECT_EQ(a->acquire(r, nullptr), 400);
  EXPECT_TRUE(measured.load()) << "a took a lease while the late job measured";
  t.join();
}

TEST(JobGroup, AStaticShareBelowAStepsLeastFailsThatJobClearly) {
  const auto group = JobGroup::create(settings("static", bytes(1000), Policy::Static, 2));
  auto a = JobGroup::join(group_name("static"), "cpu", "a", 1);
  auto b = JobGroup::join(group_name("static"), "cpu", "b", 1);
  calibrate_both(*a, *b, 500, 100);
  LeaseRequest r;
  r.least = 400;
  r.want = 800;
  EXPECT_EQ(a->acquire(r, nullptr), 500);
  a->settle(true);
  r.least = 600;
  const std::string e = error_of<Error>([&] { a->acquire(r, nullptr); });
  EXPECT_NE(e.find("policy static cannot lease"), std::string::npos) << e;
  EXPECT_NE(e.find("share 500 B is below the least 600 B"), std::string::npos) << e;
}

}  // namespace
}  // namespace memtrain::jobs
