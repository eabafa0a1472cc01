// A token <-> id mapping built from counts: the most frequent tokens first,
// after any reserved tokens (such as <pad> and <unk>).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace memtrain::data {

class Vocabulary {
 public:
  // Keeps at most max_size tokens (reserved ones included; 0: no limit),
  // most frequent first, ties in byte order. Tokens not kept map to
  // `unknown`, which must be one of the reserved tokens, or to -1 without one.
  static Vocabulary from_counts(const std::unordered_map<std::string, std::int64_t>& counts, std::int64_t max_size,
                                const std::vector<std::string>& reserved, const std::string& unknown);

  std::int64_t id(const std::string& token) const;  // the unknown id when absent
  const std::string& token(std::int64_t id) const;
  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int64_t> ids_;
  std::int64_t unknown_id_ = -1;
};

}  // namespace memtrain::data
