// The chain file format (docs/chain-format.md): reading with errors that
// name the file, the stage and the field; writing what memtrain measured.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/chain.h"

namespace memtrain {

// `origin` names the source in errors (a file path, or "chain").
Chain chain_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json chain_to_json(const Chain& chain);

Chain read_chain_file(const std::string& path);
void write_chain_file(const Chain& chain, const std::string& path);

}  // namespace memtrain
