#include "core/parse_number.h"

#include <exception>

namespace memtrain {

std::optional<std::int64_t> parse_whole_integer(const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {  // not a number, or out of range
  }
  return std::nullopt;
}

std::optional<double> parse_whole_real(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace memtrain
