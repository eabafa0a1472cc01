#include "core/graph_json.h"

#include "core/error.h"
#include "core/json_fields.h"

namespace memtrain {

using nlohmann::json;

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
    expect_object(n, where);
    GraphNode node;
    node.name = name_field(n, "node" + std::to_string(i), where);
    node.time = number_field(n, "time", true, 0, where);
    node.output_bytes = bytes_field(n, "output_bytes", true, 0, where);
    node.temp_bytes = bytes_field(n, "temp_bytes", false, 0, where);
    auto inputs = n.find("inputs");
    if (inputs != n.end()) {
      if (!inputs->is_array()) throw Error(where + ": field 'inputs' must be an array of node indices");
      for (const json& k : *inputs) {
        if (!k.is_number_integer()) throw Error(where + ": input " + k.dump() + " is not a node index");
        node.inputs.push_back(k.get<int>());
      }
    }
    auto variants = n.find("variants");
    if (variants != n.end()) {
      if (!variants->is_array()) throw Error(where + ": field 'variants' must be an array of {name, time, temp_bytes}");
      for (size_t v = 0; v < variants->size(); ++v) {
        const json& x = (*variants)[v];
        const std::string at = where + ", variant " + std::to_string(v + 1);
        expect_object(x, at);
        GraphNodeVariant variant;
        variant.name = name_field(x, "variant" + std::to_string(v + 1), at);
        variant.time = number_field(x, "time", true, 0, at);
        variant.temp_bytes = bytes_field(x, "temp_bytes", true, 0, at);
        node.variants.push_back(variant);
      }
    }
    g.nodes.push_back(node);
  }
  g.persistent_bytes = bytes_field(j, "persistent_bytes", false, 0, origin);
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
  return training_graph_from_json(read_json_file(path, "graph"), "graph file '" + path + "'");
}

}  // namespace memtrain
