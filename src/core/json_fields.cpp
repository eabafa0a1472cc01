#include "core/json_fields.h"

#include <sys/stat.h>
#include <cmath>

#include <fstream>

#include "core/error.h"

namespace memtrain {

using nlohmann::json;

double number_field(const json& obj, const char* key, bool required, double fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) throw Error(where + ": missing field '" + key + "'");
    return fallback;
  }
  if (!it->is_number()) {
    throw Error(where + ": field '" + key + "' is " + it->dump() + "; expected a number");
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) {
    throw Error(where + ": field '" + key + "' is " + it->dump() + "; expected a number >= 0");
  }
  return v;
}

int whole_field(const json& obj, const char* key, bool required, int fallback, int least, int most,
                const std::string& where) {
  const double v = number_field(obj, key, required, fallback, where);
  if (v != std::floor(v) || v < least || v > most) {
    throw Error(where + ": field '" + key + "' is " + (obj.contains(key) ? obj.at(key).dump() : std::to_string(v)) +
                "; expected a whole number in " + std::to_string(least) + ".." + std::to_string(most));
  }
  return static_cast<int>(v);
}

Bytes bytes_field(const json& obj, const char* key, bool required, Bytes fallback, const std::string& where) {
  const double v = number_field(obj, key, required, static_cast<double>(fallback), where);
  if (v != std::floor(v) || v > 9.0e18) {
    throw Error(where + ": field '" + key + "' is " + obj.at(key).dump() + "; expected a whole number of bytes");
  }
  return static_cast<Bytes>(v);
}

bool bool_field(const json& obj, const char* key, bool fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(where + ": field '" + key + "' is " + it->dump() + "; expected true or false");
  return it->get<bool>();
}

std::string name_field(const json& obj, const std::string& fallback, const std::string& where) {
  auto name = obj.find("name");
  if (name == obj.end()) return fallback;
  if (!name->is_string()) throw Error(where + ": field 'name' must be a string");
  return name->get<std::string>();
}

void expect_object(const json& value, const std::string& where) {
  if (!value.is_object()) throw Error(where + " is " + value.dump() + "; expected an object");
}

json read_json_file(const std::string& path, const std::string& kind) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError(kind + " file '" + path + "' is a folder; expected a JSON file");
  }
  std::ifstream in(path);
  if (!in) throw Error(kind + " file '" + path + "' cannot be opened; expected a readable JSON file");
  json j;
  try {
    in >> j;
  } catch (const json::parse_error& e) {
    throw Error(kind + " file '" + path + "' is not valid JSON: " + e.what());
  } catch (const std::exception& e) {
    throw Error(kind + " file '" + path + "' cannot be read: " + e.what());
  }
  return j;
}

}  // namespace memtrain
