#include <gtest/gtest.h>

#include "core/error.h"
#include "data/brown_corpus.h"
#include "data/tagging_dataset.h"
#include "support/temp_dir.h"

namespace memtrain::data {
namespace {

TEST(BrownTags, FoldsDecorations) {
  EXPECT_EQ(simplify_brown_tag("NN-TL"), "nn");
  EXPECT_EQ(simplify_brown_tag("nn-tl-hl"), "nn");
  EXPECT_EQ(simplify_brown_tag("fw-nn"), "nn");
  EXPECT_EQ(simplify_brown_tag("pps+bez"), "pps");
  EXPECT_EQ(simplify_brown_tag("bez*"), "bez");
  EXPECT_EQ(simplify_brown_tag("*"), "*");
  EXPECT_EQ(simplify_brown_tag("np$"), "np$");
  EXPECT_EQ(simplify_brown_tag("."), ".");
}

TEST(BrownCorpus, ReadsSentencesOfWordTagTokens) {
  testing::TempDir dir;
  dir.write("ca01", "\n\tThe/at jury/nn said/vbd ./.\n\n\tA/at b/c/nn ./.\n");
  dir.write("cb02", "\tOnly/rb one/cd ./.\n");
  dir.write("README", "not a corpus file");
  const BrownCorpus c = read_brown_corpus(dir.path());
  EXPECT_EQ(c.files, (std::vector<std::string>{"ca01", "cb02"}));
  ASSERT_EQ(c.sentences.size(), 3u);
  EXPECT_EQ(c.sentences[0].words, (std::vector<std::string>{"The", "jury", "said", "."}));
  EXPECT_EQ(c.sentences[1].words[1], "b/c") << "the last slash separates the tag";
  EXPECT_EQ(c.sentences[2].tags, (std::vector<std::string>{"rb", "cd", "."}));
}

// What reading the corpus in `dir` throws.
std::string brown_error(const std::string& dir) {
  try {
    read_brown_corpus(dir);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(BrownCorpus, ErrorsNameTheFileAndLine) {
  testing::TempDir dir;
  const std::string path = dir.write("ca01", "\tgood/nn\n\tbroken token/nn\n");
  const std::string msg = brown_error(dir.path());
  EXPECT_NE(msg.find("file '" + path + "' line 2: token 'broken' is not of the form word/TAG"), std::string::npos)
      << msg;
}

TEST(BrownCorpus, ErrorsForMissingOrEmptyInput) {
  EXPECT_NE(brown_error("/nonexistent/brown").find("'/nonexistent/brown' cannot be opened"), std::string::npos);
  testing::TempDir empty;
  EXPECT_NE(brown_error(empty.path()).find("holds no corpus files"), std::string::npos);
  testing::TempDir blank;
  blank.write("ca01", "\n\n");
  EXPECT_NE(brown_error(blank.path()).find("holds no sentences"), std::string::npos);
}

// The real corpus, as scripts/install-deps.sh installs it.
TEST(BrownCorpus, TheInstalledCorpusHasItsKnownShape) {
  const BrownCorpus c = read_brown_corpus(find_brown_directory(""));
  EXPECT_EQ(c.files.size(), 500u);
  EXPECT_EQ(c.sentences.size(), 57340u);
  const TaggingDataset d = make_tagging_dataset(c, 10000);
  EXPECT_EQ(d.words.size(), 10000);
  EXPECT_EQ(d.tags.size(), 92);
  EXPECT_EQ(d.max_length, 180);
  EXPECT_EQ(d.words.token(TaggingDataset::kPadWord), "<pad>");
  EXPECT_EQ(d.words.token(2), "the") << "the most frequent word follows <pad> and <unk>";
  EXPECT_GT(d.unknown_tokens, 0);
}

TEST(Vocabulary, KeepsTheMostFrequentAndMapsTheRestToUnknown) {
  const Vocabulary v =
      Vocabulary::from_counts({{"b", 5}, {"a", 5}, {"c", 9}, {"d", 1}}, 4, {"<pad>", "<unk>"}, "<unk>");
  EXPECT_EQ(v.size(), 4);
  EXPECT_EQ(v.token(2), "c");
  EXPECT_EQ(v.token(3), "a") << "ties in byte order";
  EXPECT_EQ(v.id("b"), 1);
  EXPECT_EQ(v.id("zzz"), 1);
  EXPECT_EQ(v.id("<pad>"), 0);
}

}  // namespace
}  // namespace memtrain::data
