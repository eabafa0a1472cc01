#include "cli/copy_stats_json.h"

namespace memtrain::cli {

void add_copy_stats(nlohmann::json& j, const CopyStats& c) {
  j["swap_bytes"] = c.bytes();
  j["to_host_bytes"] = c.to_host_bytes;
  j["to_device_bytes"] = c.to_device_bytes;
  j["weight_swap_bytes"] = c.weight_bytes;
  j["transfer_seconds"] = c.seconds();
  j["to_host_seconds"] = c.to_host_seconds;
  j["to_device_seconds"] = c.to_device_seconds;
  j["stall_seconds"] = c.stall_seconds();
  j["to_host_stall_seconds"] = c.to_host_stall_seconds;
  j["to_device_stall_seconds"] = c.to_device_stall_seconds;
  j["hidden_transfer_fraction"] = c.hidden_fraction();
  j["to_host_hidden_fraction"] = c.hidden_fraction(CopyDirection::ToHost);
  j["to_device_hidden_fraction"] = c.hidden_fraction(CopyDirection::ToDevice);
}

}  // namespace memtrain::cli
