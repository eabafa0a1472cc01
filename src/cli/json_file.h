// Writes what a command's --json FILE flag asks for: the JSON, indented, with
// a clear error naming the flag and the path when it cannot be written.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace memtrain::cli {

void write_json_file(const nlohmann::json& j, const std::string& path);

}  // namespace memtrain::cli
