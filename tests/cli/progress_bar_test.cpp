#include "cli/progress_bar.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace memtrain::cli {
namespace {

// What the bar printed for these steps of a run ending at `total`, into a
// file (not a terminal: one line per printed step).
std::string printed(std::int64_t total, std::int64_t first, std::int64_t last) {
  std::FILE* out = std::tmpfile();
  ProgressBar bar(out, total);
  for (std::int64_t step = first; step <= last; ++step) {
    runtime::StepRecord r;
    r.step = step;
    r.signature.shape = {2, 3};
    r.signature.size = 6;
    bar.update(r);
  }
  bar.finish();
  std::rewind(out);
  std::string text;
  for (int c = std::fgetc(out); c != EOF; c = std::fgetc(out)) text += static_cast<char>(c);
  std::fclose(out);
  return text;
}

TEST(ProgressBar, AResumedRunCountsFromWhereItResumed) {
  // Steps 9 to 12 of a run of 12, as `train --steps 12 --resume` after 8.
  const std::string text = printed(12, 9, 12);
  EXPECT_NE(text.find("step 9/12 [###############-----]"), std::string::npos) << text;
  EXPECT_NE(text.find("step 12/12 [####################]"), std::string::npos) << text;
}

TEST(ProgressBar, AStepPastTheEndFillsTheBarAndNoMore) {
  const std::string text = printed(4, 6, 6);
  EXPECT_NE(text.find("step 6/4 [####################]"), std::string::npos) << text;
}

}  // namespace
}  // namespace memtrain::cli
