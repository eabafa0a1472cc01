// The jobs file of `memtrain simulate --jobs` (docs/jobs.md).
#include <set>

#include "core/chain_json.h"
#include "core/error.h"
#include "core/json_fields.h"
#include "group_sim/group_simulator.h"
#include "plan/registry.h"

namespace memtrain::group_sim {

namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string text_field(const nlohmann::json& obj, const char* key, const std::string& fallback,
                       const std::string& where) {
  if (!obj.contains(key)) return fallback;
  if (!obj.at(key).is_string()) throw Error(where + ": field '" + key + "' must be a string");
  return obj.at(key).get<std::string>();
}

}  // namespace

GroupSpec read_group_file(const std::string& path) {
  const nlohmann::json top = read_json_file(path, "jobs");
  expect_object(top, "jobs file '" + path + "'");
  static const std::set<std::string> known_top = {"device", "jobs"};
  for (const auto& [key, value] : top.items()) {
    if (!known_top.count(key))
      throw Error("jobs file '" + path + "': unknown field '" + key + "'; expected device or jobs");
  }
  GroupSpec spec;
  if (top.contains("device")) {
    const std::string where = "jobs file '" + path + "', device";
    const nlohmann::json& d = top.at("device");
    expect_object(d, where);
    static const std::set<std::string> known = {"compute_slots", "contention", "copy_engines"};
    for (const auto& [key, value] : d.items()) {
      if (!known.count(key))
        throw Error(where + ": unknown field '" + key + "'; expected compute_slots, contention or copy_engines");
    }
    spec.device.compute_slots = number_field(d, "compute_slots", false, 1, where);
    spec.device.contention = number_field(d, "contention", false, 0, where);
    spec.device.copy_engines = number_field(d, "copy_engines", false, 1, where);
    if (spec.device.compute_slots < 1 || spec.device.copy_engines < 1)
      throw Error(where + ": compute_slots and copy_engines must be at least 1");
  }
  if (!top.contains("jobs") || !top.at("jobs").is_array() || top.at("jobs").empty())
    throw Error("jobs file '" + path + "': field 'jobs' must be a non-empty array of jobs");
  int index = 0;
  for (const nlohmann::json& j : top.at("jobs")) {
    ++index;
    const std::string where = "jobs file '" + path + "', job " + std::to_string(index);
    expect_object(j, where);
    static const std::set<std::string> known = {"chain", "label",         "planner",         "steps",
                                                "sizes", "start_seconds", "overhead_seconds"};
    for (const auto& [key, value] : j.items()) {
      if (!known.count(key)) {
        throw Error(where + ": unknown field '" + key +
                    "'; expected chain, label, planner, steps, sizes, start_seconds or overhead_seconds");
      }
    }
    SimJob job;
    const std::string chain = text_field(j, "chain", "", where);
    if (chain.empty()) throw Error(where + ": missing field 'chain' (a chain file, relative to the jobs file)");
    job.chain = read_chain_file(chain[0] == '/' ? chain : folder_of(path) + chain);
    job.label = text_field(j, "label", chain, where);
    job.planner = text_field(j, "planner", "mimose", where);
    plan::planner_traits(job.planner);  // an unknown name is refused here, naming the known ones
    job.steps = whole_field(j, "steps", true, 1, 1, 1000000000, where);
    job.start = number_field(j, "start_seconds", false, 0, where);
    job.overhead = number_field(j, "overhead_seconds", false, 0, where);
    if (j.contains("sizes")) {
      if (!j.at("sizes").is_array()) throw Error(where + ": field 'sizes' must be an array of fractions in (0, 1]");
      for (const nlohmann::json& f : j.at("sizes")) {
        if (!f.is_number() || !(f.get<double>() > 0) || f.get<double>() > 1)
          throw Error(where + ": sizes holds " + f.dump() + "; expected fractions in (0, 1] of the chain's input");
        job.sizes.push_back(f.get<double>());
      }
    }
    spec.jobs.push_back(std::move(job));
  }
  return spec;
}

}  // namespace memtrain::group_sim
