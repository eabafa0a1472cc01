// The JSON fields of a CopyStats, named the same in `memtrain simulate`'s
// result and in each step of `memtrain train`'s report.
#pragma once

#include <nlohmann/json.hpp>

#include "core/copy_stats.h"

namespace memtrain::cli {

// Adds swap_bytes (both directions), to_host_bytes, to_device_bytes,
// weight_swap_bytes, transfer_seconds, to_host_seconds, to_device_seconds,
// stall_seconds, to_host_stall_seconds, to_device_stall_seconds and the
// hidden fractions (hidden_transfer_fraction, to_host_hidden_fraction,
// to_device_hidden_fraction) to `j`.
void add_copy_stats(nlohmann::json& j, const CopyStats& copies);

}  // namespace memtrain::cli
