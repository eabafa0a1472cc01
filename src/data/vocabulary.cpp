#include "data/vocabulary.h"

#include <algorithm>

#include "core/error.h"

namespace memtrain::data {

Vocabulary Vocabulary::from_counts(const std::unordered_map<std::string, std::int64_t>& counts, std::int64_t max_size,
                                   const std::vector<std::string>& reserved, const std::string& unknown) {
  Vocabulary v;
  for (const std::string& r : reserved) {
    v.ids_.emplace(r, v.size());
    v.tokens_.push_back(r);
  }
  if (!unknown.empty()) {
    auto it = v.ids_.find(unknown);
    if (it == v.ids_.end()) throw Error("vocabulary: unknown token '" + unknown + "' is not reserved");
    v.unknown_id_ = it->second;
  }
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (const auto& [token, count] : sorted) {
    if (max_size > 0 && v.size() >= max_size) break;
    if (v.ids_.count(token)) continue;
    v.ids_.emplace(token, v.size());
    v.tokens_.push_back(token);
  }
  return v;
}

std::int64_t Vocabulary::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? unknown_id_ : it->second;
}

const std::string& Vocabulary::token(std::int64_t id) const { return tokens_.at(static_cast<size_t>(id)); }

}  // namespace memtrain::data
