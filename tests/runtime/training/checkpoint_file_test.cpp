// A checkpoint file keeps its named fields exactly; a damaged one is refused
// in one line that names the file (LibTorch's reader errors carry a C++
// stack, which must not reach the user), bytes flipped inside a tensor
// included, which only the checksum can see.
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

void expect_one_line_naming(const std::string& message, const std::string& path, const std::string& what) {
  EXPECT_NE(message.find("checkpoint " + path + " is " + what), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find("frame #"), std::string::npos) << message;
}

CheckpointFields sample_fields() {
  CheckpointFields f;
  f.tensors["weight_0"] = torch::arange(1000, torch::kFloat);
  f.tensors["state"] = torch::ones({3}, torch::kLong);
  f.integers["steps"] = 42;
  f.integers["version"] = 7;
  return f;
}

std::string written(const testing::TempDir& dir) {
  const std::string path = dir.path() + "/ckpt";
  write_checkpoint_file(path, sample_fields());
  publish_checkpoint_file(path);
  return path;
}

TEST(CheckpointFile, KeepsItsNamedFields) {
  testing::TempDir dir;
  const CheckpointFields read = read_checkpoint_file(written(dir));
  EXPECT_EQ(read.integers, sample_fields().integers);
  ASSERT_EQ(read.tensors.size(), 2u);
  EXPECT_TRUE(torch::equal(read.tensors.at("weight_0"), torch::arange(1000, torch::kFloat)));
  EXPECT_TRUE(torch::equal(read.tensors.at("state"), torch::ones({3}, torch::kLong)));
}

TEST(CheckpointFile, ADamagedFileIsRefusedInOneLine) {
  testing::TempDir dir;
  const std::string path = written(dir);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);  // truncated
  expect_one_line_naming(refusal(path), path, "not a memtrain checkpoint: ");
  std::ofstream(path, std::ios::trunc) << "not an archive";  // overwritten
  expect_one_line_naming(refusal(path), path, "not a memtrain checkpoint: ");
  std::ofstream(path, std::ios::trunc).close();  // emptied
  expect_one_line_naming(refusal(path), path, "not a memtrain checkpoint: ");
}

TEST(CheckpointFile, BytesFlippedInsideATensorAreRefused) {
  testing::TempDir dir;
  const std::string path = written(dir);
  // weight_0 holds 0, 1, ..., 999 as floats: find 500.0f's bytes and overwrite them.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const float value = 500.0f;
  const std::size_t at = bytes.find(std::string(reinterpret_cast<const char*>(&value), sizeof value));
  ASSERT_NE(at, std::string::npos);
  const float other = -1.0f;
  bytes.replace(at, sizeof other, std::string(reinterpret_cast<const char*>(&other), sizeof other));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const std::string message = refusal(path);
  expect_one_line_naming(message, path, "damaged: ");
  EXPECT_TRUE(std::filesystem::exists(path)) << "a damaged checkpoint is left as it is";
}

}  // namespace
}  // namespace memtrain::runtime
