#include "plan/registry.h"

#include <functional>
#include <utility>

#include "core/error.h"
#include "plan/all_planner.h"
#include "plan/mimose_planner.h"
#include "plan/none_planner.h"
#include "plan/optimal_planner.h"
#include "plan/sqrt_planner.h"
#include "plan/static_planner.h"
#include "plan/swap_planner.h"
#include "plan/tensile_planner.h"
#include "plan/weight_swap_planners.h"

namespace memtrain::plan {

namespace {

using Factory = std::function<std::unique_ptr<Planner>(const PlannerOptions&)>;

// An explicit table rather than self-registration: no static initialisation
// order to get wrong, and the list of names is in one place.
const std::vector<std::pair<std::string, Factory>>& table() {
  static const std::vector<std::pair<std::string, Factory>> planners = {
      {"all", [](const PlannerOptions&) { return std::make_unique<AllPlanner>(); }},
      {"joint", [](const PlannerOptions& o) { return std::make_unique<OptimalPlanner>(o, true); }},
      {"mimose", [](const PlannerOptions&) { return std::make_unique<MimosePlanner>(); }},
      {"none", [](const PlannerOptions&) { return std::make_unique<NonePlanner>(); }},
      {"optimal", [](const PlannerOptions& o) { return std::make_unique<OptimalPlanner>(o); }},
      {"sqrt", [](const PlannerOptions&) { return std::make_unique<SqrtPlanner>(); }},
      {"static", [](const PlannerOptions&) { return std::make_unique<StaticPlanner>(); }},
      {"swap", [](const PlannerOptions& o) { return std::make_unique<SwapPlanner>(o); }},
      {"swap-naive", [](const PlannerOptions& o) { return std::make_unique<PerLayerSwapPlanner>(o); }},
      {"tensile", [](const PlannerOptions&) { return std::make_unique<TensilePlanner>(); }},
  };
  return planners;
}

}  // namespace

std::unique_ptr<Planner> make_planner(const std::string& name, const PlannerOptions& options) {
  if (options.slot_bytes < 0)
    throw UsageError("slot size must be at least 1 byte, not " + std::to_string(options.slot_bytes));
  if (options.micro_batches < 1) {
    throw UsageError("micro-batches " + std::to_string(options.micro_batches) + " is out of range; expected >= 1");
  }
  if (options.slots < 1) throw UsageError("slots must be at least 1, not " + std::to_string(options.slots));
  for (const auto& [known, factory] : table()) {
    if (known == name) return factory(options);
  }
  std::string known;
  for (const std::string& n : planner_names()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown planner '" + name + "'; known: " + known);
}

std::vector<std::string> planner_names() {
  std::vector<std::string> names;
  for (const auto& entry : table()) names.push_back(entry.first);
  return names;
}

std::vector<std::string> device_weight_planner_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : table()) {
    if (!factory(PlannerOptions{})->needs_weights_on_host()) names.push_back(name);
  }
  return names;
}

void check_weights_placement(const Planner& planner, bool weights_on_host, const std::string& host_switch) {
  if (planner.needs_weights_on_host() && !weights_on_host) {
    throw UsageError("planner " + planner.name() + " swaps weights kept in host memory; it needs " + host_switch);
  }
  if (weights_on_host && !planner.plans_weights_on_host()) {
    std::string able;
    for (const auto& [name, factory] : table()) {
      if (factory(PlannerOptions{})->plans_weights_on_host()) able += (able.empty() ? "" : ", ") + name;
    }
    throw UsageError("planner " + planner.name() + " cannot plan weights in host memory; with " + host_switch +
                     " expected one of: " + able);
  }
}

}  // namespace memtrain::plan
