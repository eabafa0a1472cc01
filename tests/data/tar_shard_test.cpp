#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "core/error.h"
#include "data/tar_shard.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<ShardSample> two_samples() {
  std::vector<std::uint8_t> big(1300);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7);
  return {{"000001", {{"jpg", big}, {"cls", bytes("3")}}, 0},
          {"000002", {{"jpg", bytes("xy")}, {"cls", bytes("7")}}, 0}};
}

std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string error_of(const std::vector<std::uint8_t>& data) {
  try {
    read_tar_shard(data, "s.tar");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(TarShard, RoundTripsSamplesGroupedByBaseName) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.tar";
  write_tar_shard(path, two_samples());
  const auto back = read_tar_shard(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].key, "000001");
  EXPECT_EQ(back[0].files.at("jpg"), two_samples()[0].files.at("jpg"));
  EXPECT_EQ(back[1].files.at("cls"), bytes("7"));
  EXPECT_EQ(back[0].offset, 0);
  // 000001.cls then 000001.jpg (1300 bytes: 3 blocks) come first.
  EXPECT_EQ(back[1].offset, 512 + 512 + 512 + 3 * 512);
  EXPECT_EQ(back[0].length, back[1].offset);
  EXPECT_EQ(back[1].length, 4 * 512);
  EXPECT_EQ(file_bytes(path).size() % 512, 0u);
}

TEST(TarShard, IndexingReadsTheLayoutFromTheHeadersAlone) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.tar";
  write_tar_shard(path, two_samples());
  const auto full = read_tar_shard(path), index = index_tar_shard(path);
  ASSERT_EQ(index.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(index[i].key, full[i].key);
    EXPECT_EQ(index[i].offset, full[i].offset);
    EXPECT_EQ(index[i].length, full[i].length);
    EXPECT_EQ(index[i].files.size(), full[i].files.size());
    EXPECT_TRUE(index[i].files.at("jpg").empty()) << "no file bytes read";
  }
  // One sample's entries cut out of the shard parse alone, without the marker.
  const std::vector<std::uint8_t> all = file_bytes(path);
  const std::vector<std::uint8_t> second(all.begin() + full[1].offset, all.begin() + full[1].offset + full[1].length);
  const auto one = read_tar_entries(second, "cut");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].files.at("jpg"), bytes("xy"));
  const std::vector<std::uint8_t> cut(all.begin(), all.begin() + 1024 + 700);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(cut.data()), static_cast<std::streamsize>(cut.size()));
  try {
    index_tar_shard(path);
    FAIL() << "indexed a truncated shard";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("at byte offset 1024: truncated"), std::string::npos) << e.what();
  }
}

TEST(TarShard, GnuTarReadsWhatItWritesAndTheOtherWayRound) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.tar";
  write_tar_shard(path, two_samples());
  ASSERT_EQ(std::system(("mkdir '" + dir.path() + "/x' && tar -xf '" + path + "' -C '" + dir.path() + "/x'").c_str()),
            0);
  EXPECT_EQ(file_bytes(dir.path() + "/x/000001.jpg"), two_samples()[0].files.at("jpg"));
  EXPECT_EQ(file_bytes(dir.path() + "/x/000002.cls"), bytes("7"));

  // A shard made by GNU tar, in its default format, from a directory.
  dir.write("a.txt", "hello");
  dir.write("a.cls", "1");
  dir.write("b.txt", "world!");
  const std::string made = dir.path() + "/made.tar";
  ASSERT_EQ(std::system(("cd '" + dir.path() + "' && tar -cf made.tar a.cls a.txt b.txt").c_str()), 0);
  const auto samples = read_tar_shard(made);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].key, "a");
  EXPECT_EQ(samples[0].files.at("txt"), bytes("hello"));
  EXPECT_EQ(samples[1].files.at("txt"), bytes("world!"));
}

TEST(TarShard, TruncatedOrCorruptShardsNameTheOffset) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.tar";
  write_tar_shard(path, two_samples());
  const std::vector<std::uint8_t> good = file_bytes(path);

  std::vector<std::uint8_t> cut(good.begin(), good.begin() + 512 + 512 + 512 + 700);  // inside 000001.jpg's data
  EXPECT_NE(
      error_of(cut).find("shard 's.tar' at byte offset 1024: truncated: the entry needs 1300 bytes, 700 are left"),
      std::string::npos)
      << error_of(cut);
  std::vector<std::uint8_t> headless(good.begin(), good.begin() + 3072 + 100);
  EXPECT_NE(error_of(headless).find("at byte offset 3072: truncated inside a header"), std::string::npos)
      << error_of(headless);
  std::vector<std::uint8_t> unterminated(good.begin(), good.end() - 1024);
  EXPECT_NE(error_of(unterminated).find("without the end-of-archive marker"), std::string::npos);
  std::vector<std::uint8_t> flipped = good;
  flipped[3072 + 3] ^= 0x20;  // a name byte of 000002's first header
  EXPECT_NE(error_of(flipped).find("at byte offset 3072: header checksum does not match"), std::string::npos)
      << error_of(flipped);
  EXPECT_THROW(read_tar_shard(dir.path() + "/missing.tar"), DataError);
}

TEST(TarShard, RefusesNamesUstarCannotHold) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/s.tar";
  EXPECT_THROW(write_tar_shard(path, {{"a.b", {{"jpg", bytes("x")}}, 0}}), Error);
  EXPECT_THROW(write_tar_shard(path, {{"", {{"jpg", bytes("x")}}, 0}}), Error);
  EXPECT_THROW(write_tar_shard(path, {{std::string(99, 'k'), {{"jpg", bytes("x")}}, 0}}), Error);
  EXPECT_THROW(write_tar_shard(path, {{"k", {}, 0}}), Error);
}

}  // namespace
}  // namespace memtrain::data
