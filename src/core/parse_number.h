// Numbers written as text, all of the text: "12" is 12, "12x", "" and "x"
// are not numbers. Each caller turns nullopt into its own error, which names
// its flag or file and what would be valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace memtrain {

std::optional<std::int64_t> parse_whole_integer(const std::string& text);
std::optional<double> parse_whole_real(const std::string& text);

}  // namespace memtrain
