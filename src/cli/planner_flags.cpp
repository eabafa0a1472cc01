#include "cli/planner_flags.h"

#include <cstdint>

#include "core/error.h"
#include "plan/registry.h"

namespace memtrain::cli {

std::string planner_list() {
  std::string out;
  for (const std::string& n : plan::planner_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string help_with_planners(const std::string& help) {
  std::string out = help;
  const size_t at = out.find("PLANNERS");
  if (at != std::string::npos) out.replace(at, 8, planner_list());
  return out;
}

plan::PlannerOptions parse_planner_options(Flags& flags) {
  if (flags.has("slots") && flags.has("slot-bytes")) {
    throw UsageError("give --slots N or --slot-bytes N, not both");
  }
  plan::PlannerOptions o;
  o.slots = flags.integer("slots", o.slots, 1, 100000);
  o.slot_bytes = flags.integer("slot-bytes", 0, 1, INT64_MAX);
  return o;
}

LinkFlags parse_link_flags(Flags& flags) {
  LinkFlags l;
  if (flags.has("bandwidth")) {
    if (flags.has("d2h-bandwidth") || flags.has("h2d-bandwidth")) {
      throw UsageError("give --bandwidth BW for both directions or --d2h-bandwidth/--h2d-bandwidth, not both");
    }
    l.device_to_host = l.host_to_device = parse_bandwidth(flags.text("bandwidth", ""), "--bandwidth");
  }
  if (flags.has("d2h-bandwidth"))
    l.device_to_host = parse_bandwidth(flags.text("d2h-bandwidth", ""), "--d2h-bandwidth");
  if (flags.has("h2d-bandwidth"))
    l.host_to_device = parse_bandwidth(flags.text("h2d-bandwidth", ""), "--h2d-bandwidth");
  return l;
}

WeightFlags parse_weight_flags(Flags& flags, bool accumulate_on_device) {
  WeightFlags w;
  w.on_host = flags.choice("weights-on", "device", {"device", "host"}) == "host";
  w.micro_batches = static_cast<int>(flags.integer("micro-batches", 1, 1, 4096));
  if (w.micro_batches > 1 && !w.on_host && !accumulate_on_device) {
    throw UsageError("--micro-batches " + std::to_string(w.micro_batches) +
                     " splits a step for weight swapping; it needs --weights-on host");
  }
  return w;
}

void LinkFlags::apply(Chain& chain) const {
  if (device_to_host > 0) chain.device_to_host_bandwidth = device_to_host;
  if (host_to_device > 0) chain.host_to_device_bandwidth = host_to_device;
}

}  // namespace memtrain::cli
