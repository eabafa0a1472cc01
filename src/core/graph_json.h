// Graph files for `memtrain plan --graph`: a forward graph (the loss last)
// or a whole training graph, in JSON. Format: docs/graph-format.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/graph.h"

namespace memtrain {

// The training graph the file describes: its nodes as they are when
// "backward" is "included", otherwise with backward nodes derived
// (with_backward). Throws memtrain::Error naming `origin`, the node and the field.
Graph training_graph_from_json(const nlohmann::json& j, const std::string& origin);
Graph read_graph_file(const std::string& path);

}  // namespace memtrain
