#include "cli/json_file.h"

#include <fstream>

#include "core/error.h"

namespace memtrain::cli {

void write_json_file(const nlohmann::json& j, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error("--json: cannot write '" + path + "'");
  out << j.dump(2) << "\n";
}

}  // namespace memtrain::cli
