#include "core/graph_json.h"

#include <cmath>
#include <fstream>

#include "core/error.h"

namespace memtrain {

namespace {

using nlohmann::json;

double number(const json& obj, const char* key, bool required, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) throw Error(where + ": missing field '" + key + "'");
    return 0;
  }
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
    throw Error(where + ": field '" + key + "' is " + it->dump() + "; expected a number >= 0");
  }
  return it->get<double>();
}

Bytes bytes(const json& obj, const char* key, bool required, const std::string& where) {
  const double v = number(obj, key, required, where);
  if (v != std::floor(v) || v > 9.0e18) {
    throw Error(where + ": field '" + key + "' is " + obj.at(key).dump() + "; expected a whole number of bytes");
  }
  return static_cast<Bytes>(v);
}

}  // namespace

Graph training_graph_from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": expected a JSON object with a 'nodes' array");
  auto nodes = j.find("nodes");
  if (nodes == j.end() || !nodes->is_array() || nodes->empty()) {
    throw Error(origin + ": expected a non-empty 'nodes' array (topological order, the loss last)");
  }
  Graph g;
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    const std::string where = origin + ": node " + std::to_string(i);
    if (!n.is_object()) throw Error(where + " is " + n.dump() + "; expected an object");
    GraphNode node;
    auto name = n.find("name");
    if (name != n.end() && !name->is_string()) throw Error(where + ": field 'name' must be a string");
    node.name = name != n.end() ? name->get<std::string>() : "node" + std::to_string(i);
    node.time = number(n, "time", true, where);
    node.output_bytes = bytes(n, "output_bytes", true, where);
    node.temp_bytes = bytes(n, "temp_bytes", false, where);
    auto inputs = n.find("inputs");
    if (inputs != n.end()) {
      if (!inputs->is_array()) throw Error(where + ": field 'inputs' must be an array of node indices");
      for (const json& k : *inputs) {
        if (!k.is_number_integer()) throw Error(where + ": input " + k.dump() + " is not a node index");
        node.inputs.push_back(k.get<int>());
      }
    }
    g.nodes.push_back(node);
  }
  g.persistent_bytes = bytes(j, "persistent_bytes", false, origin);
  g.validate(origin);
  auto field = j.find("backward");
  if (field != j.end() && !field->is_string()) throw Error(origin + ": field 'backward' must be a string");
  const std::string backward = field != j.end() ? field->get<std::string>() : "derive";
  if (backward == "included") return g;
  if (backward != "derive") {
    throw Error(origin + ": field 'backward' is '" + backward + "'; expected 'derive' (default) or 'included'");
  }
  return with_backward(g);
}

Graph read_graph_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("graph file '" + path + "' cannot be opened; expected a readable JSON file");
  json j;
  try {
    in >> j;
  } catch (const json::parse_error& e) {
    throw Error("graph file '" + path + "' is not valid JSON: " + e.what());
  }
  return training_graph_from_json(j, "graph file '" + path + "'");
}

}  // namespace memtrain
