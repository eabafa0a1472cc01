// `memtrain jobs` end to end: real `memtrain train` processes sharing one
// budget, one of them killed, one joining late.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/memtrain_runs.h"
#include "support/temp_dir.h"

namespace memtrain {
namespace {

using nlohmann::json;
using testing::json_of;
using testing::losses;
using testing::memtrain;
using testing::text_of;

// Small jobs: the tagger on short sentences, one compute thread.
const std::string kJob = "--steps 6 --batch 8 --threads 1 --max-length 40";

TEST(JobsCommand, AKilledJobsMemoryIsReclaimedALateOneIsLeasedAndTheOthersTrainAsAlone) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/jobs.log";
  const int status = memtrain("jobs --budget 100% --policy arbiter --job '" + kJob + "' --job '" + kJob +
                                  " --seed 2' --job '" + kJob + " --seed 3' --kill-after 2:2 --start-after 3:3" +
                                  " --json " + dir.path() + "/jobs.json --work-dir " + dir.path() + "/work --quiet",
                              log);
  ASSERT_EQ(status, 0) << text_of(log);
  const json r = json_of(dir.path() + "/jobs.json");
  EXPECT_EQ(r.at("policy"), "arbiter");
  EXPECT_GE(r.at("compute_slots").get<double>(), 1) << "the device model the arbiter decided with";
  const double budget = r.at("budget_bytes").get<double>();
  EXPECT_GT(budget, 0);
  const json& sum = r.at("summary");
  EXPECT_EQ(sum.at("violations").get<long>(), 0);
  EXPECT_LE(sum.at("max_total_live_bytes").get<double>(), budget);
  EXPECT_GT(sum.at("max_total_live_bytes").get<double>(), 0);
  EXPECT_GT(sum.at("makespan_seconds").get<double>(), 0);
  const double jain = sum.at("jain_index").get<double>();
  EXPECT_GT(jain, 0);
  EXPECT_LE(jain, 1 + 1e-12);

  const json& jobs = r.at("jobs");
  ASSERT_EQ(jobs.size(), 3u);
  for (int i : {0, 2}) {
    const json& j = jobs[i];
    EXPECT_TRUE(j.at("completed").get<bool>()) << j.dump();
    EXPECT_EQ(j.at("steps").get<long>(), 6);
    EXPECT_GT(j.at("samples_per_second").get<double>(), 0);
    EXPECT_GT(j.at("peak_bytes").get<double>(), 0);
    EXPECT_LE(j.at("peak_bytes").get<double>(), budget);
    EXPECT_TRUE(j.at("msr").is_number()) << j.dump();
    // The arbiter says how it granted each step's lease.
    long granted = 0;
    for (const auto& [choice, count] : j.at("arbiter_choices").items()) {
      if (choice != "wait for whole") granted += count.get<long>();
    }
    EXPECT_GE(granted, 6) << j.dump();
    EXPECT_GE(j.at("eor").get<double>(), -1e-9) << "a schedule is never faster than keeping everything";
    EXPECT_GE(j.at("wait_seconds").get<double>(), 0);
    EXPECT_GT(j.at("pid").get<long>(), 0);
  }
  const json& killed = jobs[1];
  EXPECT_FALSE(killed.at("completed").get<bool>());
  EXPECT_EQ(killed.at("signal").get<int>(), 9);
  EXPECT_GE(killed.at("steps").get<long>(), 2);
  EXPECT_GT(killed.at("reclaimed_bytes").get<double>(), 0) << "it held its weights when killed";
  EXPECT_TRUE(killed.at("reclaimed_after_seconds").is_number());
  const json& late = jobs[2];
  EXPECT_GT(late.at("started_seconds").get<double>(), jobs[0].at("started_seconds").get<double>());
  EXPECT_LE(late.at("lease_delay_steps").get<long>(), 2) << "leased within two of the others' steps";

  // Sharing changes budgets, never results: job 1 trains as it does alone.
  const std::string alone = dir.path() + "/alone.json";
  ASSERT_EQ(memtrain("train " + kJob + " --budget 100% --json " + alone + " --quiet", dir.path() + "/alone.log"), 0)
      << text_of(dir.path() + "/alone.log");
  EXPECT_EQ(losses(json_of(dir.path() + "/work/job-1.json")), losses(json_of(alone)));
}

// Jobs that name no --threads share the cores: together they never run more
// compute threads than there are cores (or one each, with more jobs than cores).
TEST(JobsCommand, JobsWithoutThreadsShareTheCores) {
  testing::TempDir dir;
  const std::string job = "--steps 3 --batch 8 --max-length 40";
  ASSERT_EQ(memtrain("jobs --budget 100% --policy static --job '" + job + "' --job '" + job + " --seed 2' --json " +
                         dir.path() + "/jobs.json --work-dir " + dir.path() + "/work --quiet",
                     dir.path() + "/log"),
            0)
      << text_of(dir.path() + "/log");
  const json r = json_of(dir.path() + "/jobs.json");
  int threads = 0;
  for (const json& j : r.at("jobs")) {
    ASSERT_TRUE(j.at("threads").is_number()) << j.dump();
    EXPECT_GE(j.at("threads").get<int>(), 1);
    threads += j.at("threads").get<int>();
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_LE(threads, std::max(cores, 2)) << r.dump();
}

// What the terminal says under the arbiter: the compute slots it decided
// with, and how it granted each job's leases.
TEST(JobsCommand, TheArbiterSaysWhatItDecidedWith) {
  testing::TempDir dir;
  const std::string job = "--steps 3 --batch 8 --max-length 40";
  ASSERT_EQ(memtrain("jobs --budget 100% --policy arbiter --job '" + job + "' --job '" + job +
                         " --seed 2' --work-dir " + dir.path() + "/work",
                     dir.path() + "/log"),
            0)
      << text_of(dir.path() + "/log");
  const std::string out = text_of(dir.path() + "/log");
  EXPECT_NE(out.find("the arbiter weighed waiting against recomputation on"), std::string::npos) << out;
  EXPECT_NE(out.find("job 1's leases: "), std::string::npos) << out;
  EXPECT_NE(out.find("job 2's leases: "), std::string::npos) << out;
}

// TENSILE: each job plans with the tensile planner under a fixed allotment
// for its largest input; the allotments add up to at most the budget.
TEST(JobsCommand, TensileLeasesFixedAllotmentsAndTheJobsTrainAsAlone) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/jobs.log";
  const int status =
      memtrain("jobs --budget 90% --policy tensile --job '" + kJob + "' --job '" + kJob + " --seed 2' --json " +
                   dir.path() + "/jobs.json --work-dir " + dir.path() + "/work --quiet",
               log);
  ASSERT_EQ(status, 0) << text_of(log);
  const json r = json_of(dir.path() + "/jobs.json");
  EXPECT_EQ(r.at("policy"), "tensile");
  const double budget = r.at("budget_bytes").get<double>();
  EXPECT_EQ(r.at("summary").at("violations").get<long>(), 0);
  EXPECT_LE(r.at("summary").at("max_total_live_bytes").get<double>(), budget);
  for (int i = 0; i < 2; ++i) {
    const json& job = r.at("jobs")[i];
    EXPECT_TRUE(job.at("completed").get<bool>()) << job.dump();
    const json report = json_of(dir.path() + "/work/job-" + std::to_string(i + 1) + ".json");
    EXPECT_EQ(report.at("planner"), "tensile");
    // After the collection steps every lease is the job's allotment,
    // whatever the step's input; it changes only when the other job leaves,
    // to all this job would take alone (at least its unconstrained peak),
    // or when either job's need drifts by more than 30% and re-plans.
    std::vector<double> leases;
    for (const json& step : report.at("steps")) {
      if (step.at("plan") != "collect") leases.push_back(step.at("budget_bytes").get<double>());
    }
    ASSERT_FALSE(leases.empty());
    const long replans =
        r.at("jobs")[0].at("tensile_replans").get<long>() + r.at("jobs")[1].at("tensile_replans").get<long>();
    long unexplained = 0;
    for (size_t k = 1; k < leases.size(); ++k) {
      if (leases[k] == leases[k - 1]) continue;
      unexplained += leases[k] < report.at("reference_peak_bytes").get<double>();
    }
    EXPECT_LE(unexplained, replans) << report.at("steps").dump();
    EXPECT_LE(leases.front(), budget);
  }
  const std::string alone = dir.path() + "/alone.json";
  ASSERT_EQ(memtrain("train " + kJob + " --budget 100% --json " + alone + " --quiet", dir.path() + "/alone.log"), 0)
      << text_of(dir.path() + "/alone.log");
  EXPECT_EQ(losses(json_of(dir.path() + "/work/job-1.json")), losses(json_of(alone)));
}

// The H100 example of eight jobs, priced under every policy.
TEST(SimulateJobs, PricesTheEightJobExampleUnderEveryPolicyWithinTheBudget) {
  const char* source = std::getenv("MEMTRAIN_SOURCE_DIR");  // ctest sets it
  ASSERT_NE(source, nullptr) << "run under ctest, or set MEMTRAIN_SOURCE_DIR";
  const std::string example = std::string(source) + "/docs/examples/jobs-h100-8.json";
  testing::TempDir dir;
  // An equal split must hold the largest job (the GPT of width 2048); a
  // split by peaks must hold each job's least, which mimose puts near its peak.
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"static", "56GiB"}, {"proportional", "100%"}, {"fcfs", "90%"}, {"tensile", "90%"}, {"arbiter", "90%"}};
  for (const auto& [policy, budget] : runs) {
    const std::string out = dir.path() + "/" + policy + ".json";
    ASSERT_EQ(memtrain("simulate --jobs " + example + " --policy " + policy + " --budget " + budget + " --json " + out,
                       dir.path() + "/log"),
              0)
        << text_of(dir.path() + "/log");
    const json r = json_of(out);
    EXPECT_EQ(r.at("policy"), policy);
    EXPECT_EQ(r.at("summary").at("violations").get<long>(), 0);
    EXPECT_LE(r.at("summary").at("max_total_live_bytes").get<double>(), r.at("budget_bytes").get<double>());
    ASSERT_EQ(r.at("jobs").size(), 8u);
    for (const json& j : r.at("jobs")) {
      EXPECT_TRUE(j.at("completed").get<bool>()) << policy << " " << j.dump();
      EXPECT_EQ(j.at("steps").get<long>(), 100);
    }
  }
  // Too small a budget names each job; a missing policy names the valid ones.
  EXPECT_EQ(memtrain("simulate --jobs " + example + " --policy fcfs --budget 1GiB", dir.path() + "/log"), 1);
  EXPECT_NE(text_of(dir.path() + "/log").find("job 8 (gpt-w1024 8) needs at least"), std::string::npos)
      << text_of(dir.path() + "/log");
  EXPECT_EQ(memtrain("simulate --jobs " + example + " --budget 90%", dir.path() + "/log"), 2);
  EXPECT_NE(text_of(dir.path() + "/log").find("expected static, proportional, fcfs, tensile or arbiter"),
            std::string::npos);
}

// Every policy over budgets: a CSV row per policy and budget from the least
// at which any completes to 100%, a plot, and the arbiter on this
// time-sliced device never slower than the best other policy by 1%.
TEST(SimulateJobs, TheSweepPricesEveryPolicyFromTheLeastCompletingBudgetTo100Percent) {
  const char* source = std::getenv("MEMTRAIN_SOURCE_DIR");  // ctest sets it
  ASSERT_NE(source, nullptr) << "run under ctest, or set MEMTRAIN_SOURCE_DIR";
  const std::string example = std::string(source) + "/docs/examples/jobs-h100-8.json";
  testing::TempDir dir;
  const std::string csv = dir.path() + "/sweep.csv", svg = dir.path() + "/sweep.svg";
  ASSERT_EQ(memtrain("simulate --jobs " + example + " --sweep --points 5 --csv " + csv + " --plot " + svg,
                     dir.path() + "/log"),
            0)
      << text_of(dir.path() + "/log");
  std::istringstream lines(text_of(csv));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "policy,budget_percent,budget_bytes,completed,makespan_seconds,violations");
  std::map<double, std::map<std::string, double>> makespans;  // completed runs, by budget and policy
  int rows = 0, runs = 0;  // runs of consecutive rows of one policy: the plot draws a line through each
  double lowest = 100;
  std::string previous;
  while (std::getline(lines, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    ASSERT_GE(f.size(), 4u) << line;
    runs += f[0] != previous;
    previous = f[0];
    const double percent = std::stod(f[1]);
    lowest = std::min(lowest, percent);
    if (f[3] == "1") {
      makespans[percent][f[0]] = std::stod(f[4]);
      EXPECT_EQ(f[5], "0") << "no violations: " << line;
    }
  }
  EXPECT_EQ(rows, 5 * 5);
  EXPECT_EQ(runs, 5) << "each policy's rows one after another";
  EXPECT_FALSE(makespans[lowest].empty()) << "some policy completes at the sweep's least budget";
  ASSERT_TRUE(makespans.count(100.0));
  for (const auto& [percent, by_policy] : makespans) {
    if (!by_policy.count("arbiter")) continue;
    for (const auto& [policy, m] : by_policy) {
      EXPECT_LE(by_policy.at("arbiter"), 1.01 * m) << policy << " at " << percent << "%";
    }
  }
  EXPECT_NE(text_of(svg).find("<svg"), std::string::npos);
  // A sweep runs every policy at many budgets: one of them is refused.
  EXPECT_EQ(memtrain("simulate --jobs " + example + " --sweep --policy fcfs", dir.path() + "/log"), 2);
  EXPECT_NE(text_of(dir.path() + "/log").find("drop --policy"), std::string::npos) << text_of(dir.path() + "/log");
}

TEST(JobsCommand, ABudgetBelowWhatTheJobsNeedNamesEachJobAndItsLeast) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/jobs.log";
  const int status = memtrain("jobs --budget 1MiB --policy fcfs --job '" + kJob + "' --job '" + kJob +
                                  " --model gpt' --work-dir " + dir.path() + "/work --quiet",
                              log);
  EXPECT_EQ(status, 1);
  const std::string out = text_of(log);
  EXPECT_NE(out.find("budget 1.0 MiB (1048576 bytes) is below what the jobs need"), std::string::npos) << out;
  EXPECT_NE(out.find("job 1 (transformer mimose batch 8 seed 1) needs at least"), std::string::npos) << out;
  EXPECT_NE(out.find("job 2 (gpt mimose batch 8 seed 1) needs at least"), std::string::npos) << out;
}

TEST(JobsCommand, BadFlagsAreRefusedWithWhatWouldBeValid) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/jobs.log";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"jobs --budget 50% --policy zico --job '--steps 1'", "expected static, proportional, fcfs, tensile or arbiter"},
      {"jobs --budget 50% --policy tensile --job '--steps 1 --planner mimose'",
       "--policy tensile plans every job with --planner tensile; drop --planner mimose from that job"},
      {"jobs --policy fcfs --job '--steps 1'", "--budget is required"},
      {"jobs --budget 50% --policy fcfs --job '--steps 1 --budget 10MiB'", "--budget is the group's to set"},
      {"jobs --budget 50% --policy fcfs --job '--steps 1' --kill-after 3:1", "expected a job number 1..1"},
      {"jobs --budget 50% --policy fcfs --job '--steps 1' --device cuda",
       "--device 'cuda' is not supported for sharing yet"},
      {"train --share-label x --steps 1", "give --share too"},
      {"train --share g --budget 10MiB --steps 1", "give --budget to memtrain jobs"},
  };
  for (const auto& [args, message] : cases) {
    EXPECT_EQ(memtrain(args, log), 2) << args << "\n" << text_of(log);
    EXPECT_NE(text_of(log).find(message), std::string::npos) << args << "\n" << text_of(log);
  }
}

}  // namespace
}  // namespace memtrain
