#include <gtest/gtest.h>

#include "core/error.h"
#include "jobs/lease_policy.h"

namespace memtrain::jobs {
namespace {

// A job between steps: it holds (and is leased) its resident bytes.
JobView idle(Bytes resident, Bytes reference = 0) {
  JobView j;
  j.present = true;
  j.live = j.lease = j.resident = resident;
  j.reference = reference;
  return j;
}

// A job mid-step under `lease`, holding `live`.
JobView running(Bytes resident, Bytes lease, Bytes live) {
  JobView j = idle(resident);
  j.lease = lease;
  j.live = live;
  return j;
}

JobView asking(JobView j, std::int64_t ticket, Bytes least, Bytes want, std::vector<BudgetPoint> curve = {}) {
  j.waiting = true;
  j.ticket = ticket;
  j.least = least;
  j.want = want;
  j.curve = curve.empty() ? std::vector<BudgetPoint>{{want, 1.0}} : curve;
  return j;
}

TEST(LeasePolicy, NamesParseBackAndUnknownOnesAreRefusedWithTheValidOnes) {
  for (Policy p : {Policy::Static, Policy::Proportional, Policy::Fcfs, Policy::Arbiter, Policy::Tensile})
    EXPECT_EQ(parse_policy(policy_name(p)), p);
  try {
    parse_policy("zico");
    FAIL() << "zico is not a policy";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("static, proportional, fcfs, tensile or arbiter"), std::string::npos)
        << e.what();
  }
}

TEST(LeasePolicy, StaticGrantsAnEqualShareOnceTheOthersLeaveRoom) {
  // 900 bytes for 3 jobs: 300 each, whatever the requester wants.
  std::vector<JobView> jobs = {asking(idle(100), 1, 200, 800), running(100, 300, 250), idle(100)};
  Decision d = decide(Policy::Static, jobs, 0, 900, 3);
  EXPECT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 300);
  // A job started late and counted in: still equal shares of the jobs present.
  jobs.push_back(idle(50));
  EXPECT_EQ(decide(Policy::Static, jobs, 0, 900, 3).bytes, 225);
  // The second job holds more than its share (an unenforced planner): wait.
  jobs.pop_back();
  jobs[1].live = 550;
  EXPECT_EQ(decide(Policy::Static, jobs, 0, 900, 3).kind, Decision::Wait);
}

TEST(LeasePolicy, StaticNeverGrantsAShareBelowTheInputsLeast) {
  const std::vector<JobView> jobs = {asking(idle(100), 1, 350, 800), idle(100), idle(100)};
  const Decision d = decide(Policy::Static, jobs, 0, 900, 3);
  EXPECT_EQ(d.kind, Decision::Never);
  EXPECT_NE(d.why.find("share"), std::string::npos) << d.why;
}

TEST(LeasePolicy, ProportionalSplitsByUnconstrainedPeaks) {
  const std::vector<JobView> jobs = {asking(idle(10, 100), 1, 50, 400), idle(10, 300)};
  EXPECT_EQ(decide(Policy::Proportional, jobs, 0, 1000, 2).bytes, 250);
  std::vector<JobView> other = {idle(10, 100), asking(idle(10, 300), 1, 50, 900)};
  EXPECT_EQ(decide(Policy::Proportional, other, 1, 1000, 2).bytes, 750);
}

TEST(LeasePolicy, FcfsServesRequestsInOrderEachItsWholeWant) {
  // Job 1 asked first and waits for room; job 0, asking later, waits behind it
  // even though its own want would fit now.
  std::vector<JobView> jobs = {asking(idle(100), 5, 150, 300), asking(idle(100), 4, 150, 700), running(100, 500, 480)};
  EXPECT_EQ(decide(Policy::Fcfs, jobs, 1, 1000, 3).kind, Decision::Wait);  // 1000-100-500 = 400 free < 700
  EXPECT_EQ(decide(Policy::Fcfs, jobs, 0, 1000, 3).kind, Decision::Wait);
  jobs[2] = idle(100);  // the running job settles
  const Decision first = decide(Policy::Fcfs, jobs, 1, 1000, 3);
  EXPECT_EQ(first.kind, Decision::Grant);
  EXPECT_EQ(first.bytes, 700);
  // A want beyond all the others ever leave is capped at that, not waited for forever.
  std::vector<JobView> greedy = {asking(idle(100), 1, 150, 5000), idle(300)};
  EXPECT_EQ(decide(Policy::Fcfs, greedy, 0, 1000, 2).bytes, 700);
}

TEST(LeasePolicy, NoPolicyGrantsWhatTheOthersResidentBytesNeverLeave) {
  for (Policy p : {Policy::Static, Policy::Proportional, Policy::Fcfs, Policy::Arbiter}) {
    const std::vector<JobView> jobs = {asking(idle(100), 1, 700, 900), idle(400, 1), idle(10, 1)};
    const Decision d = decide(p, jobs, 0, 1000, 3);
    EXPECT_EQ(d.kind, Decision::Never) << policy_name(p);
    EXPECT_NE(d.why.find("other jobs"), std::string::npos) << policy_name(p) << ": " << d.why;
  }
}

TEST(LeasePolicy, GrantsAndWhatTheOthersHoldNeverPassTheBudget) {
  // Every policy, many situations: a grant plus the others' holdings fits.
  for (Policy p : {Policy::Static, Policy::Proportional, Policy::Fcfs, Policy::Arbiter, Policy::Tensile}) {
    for (Bytes other_live = 100; other_live <= 900; other_live += 50) {
      for (Bytes want = 200; want <= 1200; want += 100) {
        const std::vector<BudgetPoint> curve = {{200, 3.0}, {want / 2 + 100, 2.0}, {want, 1.0}};
        const std::vector<JobView> jobs = {asking(idle(100, 500), 1, 200, want, curve),
                                           running(100, other_live, other_live), idle(50, 500)};
        const Decision d = decide(p, jobs, 0, 1200, 3);
        if (d.kind != Decision::Grant) continue;
        EXPECT_GE(d.bytes, 200) << policy_name(p);
        EXPECT_LE(d.bytes + other_live + 50, 1200) << policy_name(p) << " other " << other_live << " want " << want;
      }
    }
  }
}

JobView calibrated_job(Bytes reference, Bytes least_largest, std::vector<Bytes> tensors) {
  JobView j = idle(10, reference);
  j.least_largest = least_largest;
  j.tensors = std::move(tensors);
  return j;
}

TEST(LeasePolicy, TensileKeepsEveryPeakWhenTheirSumFits) {
  const std::vector<JobView> jobs = {calibrated_job(400, 100, {50}), calibrated_job(500, 200, {60})};
  EXPECT_EQ(tensile_allotments(jobs, 900), (std::vector<Bytes>{400, 500}));
}

TEST(LeasePolicy, TensileSwapsTheLargestTensorsOfAnyJobFirst) {
  // Sum 900, budget 800: the largest tensor (job 1's 70) and then 30 of
  // job 0's 60 lower the global peak to the budget.
  std::vector<JobView> jobs = {calibrated_job(400, 100, {60, 20}), calibrated_job(500, 200, {70, 10})};
  EXPECT_EQ(tensile_allotments(jobs, 800), (std::vector<Bytes>{370, 430}));
  // A job is not cut below its least: job 1's 70 leaves it at 450.
  jobs[1].least_largest = 450;
  EXPECT_EQ(tensile_allotments(jobs, 800), (std::vector<Bytes>{350, 450}));
  // An absent job gets nothing and leaves its peak to the others.
  jobs[1].present = false;
  EXPECT_EQ(tensile_allotments(jobs, 800), (std::vector<Bytes>{400, 0}));
}

TEST(LeasePolicy, TensileRecomputesWhatSwapsCannotCover) {
  // Swaps cover 30 of 300: the other 270 comes from what each job can still
  // give above its least (280 and 290 after the swaps).
  const std::vector<JobView> jobs = {calibrated_job(400, 100, {20}), calibrated_job(500, 200, {10})};
  const std::vector<Bytes> allot = tensile_allotments(jobs, 600);
  EXPECT_LE(allot[0] + allot[1], 600);
  EXPECT_GE(allot[0] + allot[1], 598);
  EXPECT_GE(allot[0], 100);
  EXPECT_GE(allot[1], 200);
  EXPECT_NEAR(static_cast<double>(380 - allot[0]) / 280, static_cast<double>(490 - allot[1]) / 290, 0.01);
}

TEST(LeasePolicy, TensileLeasesTheAllotmentWhateverTheInputNeeds) {
  // This step wants 300 of job 0's 370 allotment (planned for its largest
  // input's 400: a drift of 25%, within TENSILE's 30%), so it leases the
  // whole allotment.
  std::vector<JobView> jobs = {calibrated_job(400, 100, {60, 20}), calibrated_job(500, 200, {70, 10})};
  jobs[0] = asking(jobs[0], 1, 120, 300);
  EXPECT_FALSE(replan_tensile(jobs[0]));
  Decision d = decide(Policy::Tensile, jobs, 0, 800, 2);
  ASSERT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 370);
  // While the other job holds more than its allotment leaves, it waits.
  jobs[1].live = jobs[1].lease = 500;
  EXPECT_EQ(decide(Policy::Tensile, jobs, 0, 800, 2).kind, Decision::Wait);
}

TEST(LeasePolicy, TensileReplansAJobWhoseInputDriftsMoreThanThirtyPercent) {
  std::vector<JobView> jobs = {calibrated_job(400, 100, {60, 20}), calibrated_job(500, 200, {70, 10})};
  // Job 0's step needs 200 (half its largest input's 400): its allotment is
  // planned again for 200, least 80. The global peak 200 + 500 fits 800: no
  // swaps, and job 1 keeps its whole 500.
  jobs[0] = asking(jobs[0], 1, 80, 200);
  ASSERT_TRUE(replan_tensile(jobs[0]));
  EXPECT_EQ(jobs[0].planned, 200);
  EXPECT_EQ(jobs[0].planned_least, 80);
  EXPECT_EQ(tensile_allotments(jobs, 800), (std::vector<Bytes>{200, 500}));
  Decision d = decide(Policy::Tensile, jobs, 0, 800, 2);
  ASSERT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 200);
  // Within 30% of 200 the plan stands; back at 400 it is planned again.
  jobs[0] = asking(jobs[0], 2, 90, 250);
  EXPECT_FALSE(replan_tensile(jobs[0]));
  EXPECT_EQ(jobs[0].planned, 200);
  jobs[0] = asking(jobs[0], 3, 100, 400);
  EXPECT_TRUE(replan_tensile(jobs[0]));
  EXPECT_EQ(tensile_allotments(jobs, 800), (std::vector<Bytes>{370, 430}));
  // A re-planned job's tensors scale with its need: at 200 (half of 400)
  // job 0's largest tensor is 30, so under a budget of 600 the swaps take
  // job 1's 70 and then 30 of job 0's.
  jobs[0] = asking(jobs[0], 4, 80, 200);
  ASSERT_TRUE(replan_tensile(jobs[0]));
  EXPECT_EQ(tensile_allotments(jobs, 600), (std::vector<Bytes>{170, 430}));
}

TEST(LeasePolicy, OnABusyTimeSlicedDeviceTheArbiterWaitsForTheWholeWantRatherThanRecompute) {
  // Job 1 steps under a lease of 500; job 0 asks for 600 (knee 300).
  const std::vector<BudgetPoint> curve = {{300, 1.04}, {600, 1.0}};
  std::vector<JobView> jobs = {asking(idle(100), 1, 200, 600, curve), running(100, 500, 450)};
  jobs[1].stepping = true;
  // Without a device model (every job its own slot) it takes the knee now.
  Decision d = decide(Policy::Arbiter, jobs, 0, 1000, 2);
  EXPECT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 300);
  EXPECT_EQ(d.choice, Decision::Knee);
  // Time-sliced (one slot), job 1 keeps the device busy: waiting costs no
  // device time, recomputing would; it waits for its whole 600.
  d = decide(Policy::Arbiter, jobs, 0, 1000, 2, 1);
  EXPECT_EQ(d.kind, Decision::Wait);
  EXPECT_EQ(d.choice, Decision::WaitForWhole);
  // Two slots: the other slot would idle while it waits, so it takes the knee.
  EXPECT_EQ(decide(Policy::Arbiter, jobs, 0, 1000, 2, 2).choice, Decision::Knee);
  // Job 1's step over, the whole want fits: granted whole.
  jobs[1] = idle(100);
  d = decide(Policy::Arbiter, jobs, 0, 1000, 2, 1);
  EXPECT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 600);
  EXPECT_EQ(d.choice, Decision::Whole);
  // Nothing else steps (job 1's step just ended, its lease not yet settled)
  // and the whole want cannot fit: waiting would idle the device, so it
  // takes the knee now.
  jobs[1] = running(100, 500, 450);
  d = decide(Policy::Arbiter, jobs, 0, 1000, 2, 1);
  EXPECT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 300);
  EXPECT_EQ(d.choice, Decision::Knee);
}

TEST(LeasePolicy, JainsIndexIsOneWhenEqualAndOneOverNWhenOneHasEverything) {
  EXPECT_DOUBLE_EQ(jain_index({2, 2, 2}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index({5, 0, 0, 0}), 0.25);
  EXPECT_NEAR(jain_index({1, 2}), 9.0 / 10.0, 1e-12);
}

TEST(LeasePolicy, AShortfallNamesEachJobAndWhatThePolicyLeavesIt) {
  // Each keeps 100 between steps; static leaves each 1000 / 2 = 500.
  std::vector<JobView> jobs = {idle(100, 600), idle(100, 400)};
  jobs[0].least_largest = 450;
  jobs[1].least_largest = 550;
  EXPECT_EQ(most_ever_leased(Policy::Static, jobs, 0, 1000, 2), 500);
  EXPECT_EQ(most_ever_leased(Policy::Fcfs, jobs, 0, 1000, 2), 900);
  EXPECT_EQ(most_ever_leased(Policy::Proportional, jobs, 1, 1000, 2), 400);
  EXPECT_EQ(shortfall(Policy::Fcfs, jobs, {"a", "b"}, 1000, 2), "");
  const std::string s = shortfall(Policy::Static, jobs, {"a", "b"}, 1000, 2);
  EXPECT_NE(s.find("budget 1000 B (1000 bytes) is below what the jobs need at their largest inputs"), std::string::npos)
      << s;
  EXPECT_NE(s.find("b needs at least 550 B and static leaves it 500 B (short)"), std::string::npos) << s;
  EXPECT_NE(s.find("a needs at least 450 B and static leaves it 500 B;"), std::string::npos) << s;
}

TEST(LeasePolicy, ArbiterGrantsTheKneeNotTheWholeWant) {
  // Past 600 bytes the step is within 5% of its fastest: the rest stays free.
  const std::vector<BudgetPoint> curve = {{400, 2.0}, {500, 1.2}, {600, 1.03}, {700, 1.0}};
  EXPECT_EQ(knee_of(curve, kArbiterSlack), 600);
  std::vector<JobView> jobs = {asking(idle(100), 1, 400, 700, curve), idle(100)};
  Decision d = decide(Policy::Arbiter, jobs, 0, 2000, 2);
  EXPECT_EQ(d.bytes, 600);
  // Short of the knee: the most the room holds on the curve, rather than waiting.
  jobs[1] = running(100, 1450, 1400);
  d = decide(Policy::Arbiter, jobs, 0, 2000, 2);  // 550 free
  EXPECT_EQ(d.kind, Decision::Grant);
  EXPECT_EQ(d.bytes, 500);
  // Short of the least: wait.
  jobs[1] = running(100, 1650, 1600);
  EXPECT_EQ(decide(Policy::Arbiter, jobs, 0, 2000, 2).kind, Decision::Wait);
}

TEST(LeasePolicy, ArbiterKeepsWhatAnOlderRequestLacksOfItsLeast) {
  // Job 1 asked first and needs 500 more than it holds; job 0's grant must
  // leave that, so job 1 cannot starve behind later, smaller requests.
  const std::vector<BudgetPoint> curve = {{300, 2.0}, {600, 1.0}};
  std::vector<JobView> jobs = {asking(idle(100), 2, 300, 600, curve), asking(idle(100), 1, 600, 900),
                               running(100, 400, 400)};
  // 2000 - 100 - 400 = 1500 free now; 500 kept for job 1 leaves 1000: the knee fits.
  EXPECT_EQ(decide(Policy::Arbiter, jobs, 0, 2000, 3).bytes, 600);
  jobs[2] = running(100, 1000, 1000);  // 900 free, 500 kept: 400 left, the curve's 300
  EXPECT_EQ(decide(Policy::Arbiter, jobs, 0, 2000, 3).bytes, 300);
  jobs[2] = running(100, 1200, 1200);  // 700 free, 500 kept: 200 < least
  EXPECT_EQ(decide(Policy::Arbiter, jobs, 0, 2000, 3).kind, Decision::Wait);
}

}  // namespace
}  // namespace memtrain::jobs
