// A damaged checkpoint is refused in one line that names the file; LibTorch's
// reader errors carry a C++ stack, which must not reach the user.
#include "runtime/training/checkpoint_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/temp_dir.h"

namespace memtrain::runtime {
namespace {

std::string refusal(const std::string& path) {
  try {
    read_checkpoint_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_one_line_naming(const std::string& message, const std::string& path) {
  EXPECT_NE(message.find("checkpoint " + path + " is not a memtrain checkpoint: "), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find("frame #"), std::string::npos) << message;
}

TEST(CheckpointFile, ADamagedFileIsRefusedInOneLine) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/ckpt";
  write_checkpoint_file(path, {torch::arange(1000, torch::kFloat), torch::ones({3})});
  publish_checkpoint_file(path);
  ASSERT_EQ(read_checkpoint_file(path).size(), 2u);

  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);  // truncated
  expect_one_line_naming(refusal(path), path);
  std::ofstream(path, std::ios::trunc) << "not an archive";  // overwritten
  expect_one_line_naming(refusal(path), path);
  std::ofstream(path, std::ios::trunc).close();  // emptied
  expect_one_line_naming(refusal(path), path);
}

}  // namespace
}  // namespace memtrain::runtime
