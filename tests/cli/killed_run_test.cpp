// Checkpoints as people use them, with the real binary: a run killed with
// SIGKILL at a random point and resumed with the same flags ends with the
// parameters of a run never interrupted, with and without --quiet (the
// progress line in a log); a checkpoint with bytes flipped inside its
// weights is refused in one line.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/memtrain_runs.h"
#include "support/temp_dir.h"

namespace memtrain {
namespace {

using testing::json_of;
using testing::memtrain;
using testing::text_of;

const std::string kRun =
    "train --layers 2 --width 64 --heads 4 --batch 8 --vocab 2000 --threads 1 --budget 75% --seed 1";

pid_t start(const std::string& args, const std::string& log) {
  const pid_t pid = testing::start_memtrain(args, log);
  EXPECT_GT(pid, 0) << "cannot start memtrain " << args;
  return pid;
}

// Starts the run, kills it some milliseconds after its first checkpoint is
// in place, and resumes it; returns the resumed run's report.
nlohmann::json killed_and_resumed(const std::string& flags, const std::string& dir, int delay_ms) {
  const std::string checkpoints = dir + "/ckpt", log = dir + "/log", resumed = dir + "/resumed.json";
  const std::string args = kRun + " --steps 80" + flags + " --checkpoint-dir " + checkpoints + " --checkpoint-every 1";
  const pid_t pid = start(args, log);
  const std::string first = checkpoints + "/memtrain-rank0.ckpt";
  for (int i = 0; i < 2400 && ::access(first.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_EQ(::access(first.c_str(), F_OK), 0) << text_of(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(memtrain(args + " --resume --json " + resumed, log), 0) << text_of(log);
  return json_of(resumed);
}

TEST(KilledRun, ResumedWithAndWithoutQuietEndsAsAnUninterruptedRun) {
  testing::TempDir dir;
  const std::string whole = dir.path() + "/whole.json", log = dir.path() + "/log";
  ASSERT_EQ(memtrain(kRun + " --steps 80 --quiet --json " + whole, log), 0) << text_of(log);
  const std::string digest = json_of(whole).at("parameter_digest");
  std::mt19937 draw(std::random_device{}());
  for (const char* flags : {" --quiet", ""}) {
    testing::TempDir run;
    const int delay_ms = std::uniform_int_distribution<int>(0, 1000)(draw);
    const nlohmann::json r = killed_and_resumed(flags, run.path(), delay_ms);
    EXPECT_EQ(r.at("parameter_digest"), digest)
        << "flags '" << flags << "', killed " << delay_ms << " ms after the first checkpoint";
    // Without --quiet the resumed run's progress line ends at the run's last step (when it had steps left).
    const std::string said = text_of(run.path() + "/log");
    if (std::string(flags).empty() && said.find("after step 80") == std::string::npos) {
      EXPECT_NE(said.find("resumed from"), std::string::npos) << said;
      EXPECT_NE(said.find("step 80/80"), std::string::npos) << said;
    }
  }
}

TEST(KilledRun, ACheckpointWithFlippedBytesIsRefusedInOneLine) {
  testing::TempDir dir;
  const std::string log = dir.path() + "/log", checkpoints = dir.path() + "/ckpt";
  const std::string args = kRun + " --checkpoint-dir " + checkpoints + " --checkpoint-every 2";
  ASSERT_EQ(memtrain(args + " --steps 4", log), 0) << text_of(log);
  const std::string path = checkpoints + "/memtrain-rank0.ckpt";
  // Four bytes in the middle of the file: inside the weights, which fill most of it.
  const auto size = std::filesystem::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write("\x7f\x7f\x7f\x7f", 4);
  }
  EXPECT_EQ(memtrain(args + " --steps 6 --resume", log), 1) << text_of(log);
  const std::string said = text_of(log);
  EXPECT_NE(said.find("checkpoint " + path + " is damaged"), std::string::npos) << said;
  EXPECT_EQ(said.find("frame #"), std::string::npos) << said;
  const std::string refusal = said.substr(said.find("memtrain: checkpoint "));
  EXPECT_EQ(refusal.find('\n'), refusal.size() - 1) << "the refusal is the last line, and one line: " << said;
}

}  // namespace
}  // namespace memtrain
