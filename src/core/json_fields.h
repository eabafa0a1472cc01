// Reading the numbers of memtrain's JSON files (chains, graphs) with errors
// that name the file, the place and the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/units.h"

namespace memtrain {

// A number >= 0 at obj[key]; `fallback` when absent and not required.
// `where` prefixes errors: "where: missing field 'key'", "...; expected a number >= 0".
double number_field(const nlohmann::json& obj, const char* key, bool required, double fallback,
                    const std::string& where);
// The same, a whole number (a stage index, a count) in [least, most].
int whole_field(const nlohmann::json& obj, const char* key, bool required, int fallback, int least, int most,
                const std::string& where);
// The same, a whole number of bytes.
Bytes bytes_field(const nlohmann::json& obj, const char* key, bool required, Bytes fallback, const std::string& where);
// true or false at obj[key]; `fallback` when absent.
bool bool_field(const nlohmann::json& obj, const char* key, bool fallback, const std::string& where);

// The string at obj["name"], or `fallback` when absent; "where: field 'name'
// must be a string" otherwise.
std::string name_field(const nlohmann::json& obj, const std::string& fallback, const std::string& where);
// "where is <value>; expected an object" unless `value` is one.
void expect_object(const nlohmann::json& value, const std::string& where);

// The JSON in `path`; errors say "<kind> file 'path' cannot be opened ..." or "... is not valid JSON".
nlohmann::json read_json_file(const std::string& path, const std::string& kind);

}  // namespace memtrain
